"""Small helpers every lesson starts with: seeds, threads and the device."""

from __future__ import annotations

import getpass
import os
import platform
import random
import subprocess
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch

from transformer_lib.errors import InvalidValue


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and PyTorch's random generators (all devices)."""
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002 -- the global generator is what library code draws from
    torch.manual_seed(seed)


DEVICE_ENV = "TRANSFORMER_LIB_DEVICE"  # cpu, cuda or mps: the device the lessons use, whatever else there is


def pick_device() -> torch.device:
    """The first CUDA GPU if there is one, else Apple's MPS, else the CPU; or the device that
    ``TRANSFORMER_LIB_DEVICE`` names (the tests run every lesson on the CPU, as its outputs were
    stored, on a Mac too)."""
    chosen = os.environ.get(DEVICE_ENV, "").strip()
    if chosen:
        if chosen.split(":")[0] not in ("cpu", "cuda", "mps"):
            raise InvalidValue(f"{DEVICE_ENV}={chosen!r} is not a device: use cpu, cuda, cuda:N or mps, or unset it")
        return torch.device(chosen)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def setup(seed: int = 0, threads: int | None = 2) -> torch.device:
    """Make a lesson repeatable and return the device it should use.

    CPU results are bit-identical run to run only with the same number of threads, so lessons
    fix it: ``threads`` CPU threads, unless the reader chose a number in ``OMP_NUM_THREADS``,
    which wins (``threads=None`` leaves PyTorch's default).
    """
    if os.environ.get("OMP_NUM_THREADS", "").strip().isdigit():
        threads = int(os.environ["OMP_NUM_THREADS"])
    if threads is not None and threads > 0:
        torch.set_num_threads(threads)
    emulated = os.environ.get("ATEN_CPU_CAPABILITY", "").strip().lower()
    if emulated:
        _compile_cache_of_its_own(emulated)
    if emulated == "default":
        _compile_for_this_cpu()
    seed_everything(seed)
    return pick_device()


def _compile_cache_of_its_own(capability: str) -> None:
    """Keep ``torch.compile``'s kernels for an emulated CPU apart from the machine's own.

    Compiled kernels are cached on disk and shared by every run on the machine, and PyTorch 2.13
    reuses a kernel built for one vector width under another: on an AVX-512 machine, a run under
    ``ATEN_CPU_CAPABILITY=avx2`` after a plain run computed wrong values (and a plain run after an
    emulated one too). A real CPU never changes between runs; an emulated one does. A cache
    folder the reader chose (``TORCHINDUCTOR_CACHE_DIR``) is left as it is.
    """
    if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):  # no name for this user id (a container's)
            user = "user"
        folder = Path(tempfile.gettempdir()) / f"torchinductor_{user}_emulating_{capability}"
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(folder)


def _compile_for_this_cpu() -> None:
    """Let ``torch.compile`` use the vector instructions of the CPU it runs on.

    ``ATEN_CPU_CAPABILITY=default`` (how the book's CI emulates a CPU without vector units)
    switches off PyTorch's vectorised kernels, and ``torch.compile`` reads the same variable:
    it then generates scalar C++ that, in PyTorch 2.13, does not build. The emulation is meant
    for PyTorch's own kernels, so compiled code keeps the width the hardware has.
    """
    from torch._inductor import config
    from torch._inductor.cpu_vec_isa import valid_vec_isa_list

    available = valid_vec_isa_list()
    if available:
        config.cpp.simdlen = available[0].bit_width()


COMMIT_ENV = "TRANSFORMER_LIB_COMMIT"


def _cpu_name() -> str:
    """The CPU's model name (Linux's /proc/cpuinfo), else what the platform module says: CPU timings depend on it."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment(device: torch.device) -> dict:
    """What a result depends on: versions, device and the git commit of the code.

    The environment variable ``TRANSFORMER_LIB_COMMIT``, where set, names the commit instead: a
    machine that received a copy of the working tree may hold a stale copy of its git history.
    """
    repo = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        try:
            out = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=10)
            return out.stdout.strip() if out.returncode == 0 else "unknown"
        except (OSError, subprocess.SubprocessError):
            return "unknown"

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({platform.machine()})",
        "cpu": _cpu_name(),
        "cpu_threads": torch.get_num_threads(),
        # the vector instructions PyTorch's CPU kernels use ("AVX2", "AVX512", ...): the same CPU
        # name may hide either, at twice the speed or half
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "git_commit": os.environ.get(COMMIT_ENV) or git("rev-parse", "HEAD"),
        "git_dirty": git("status", "--porcelain", "--untracked-files=no") not in ("", "unknown"),
        "started_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
