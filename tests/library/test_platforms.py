"""What differs on a reader's macOS or Windows, tested where Linux can stand in for them.

* Windows writes a redirected stream and opens a text file in its code page (cp1252), not UTF-8:
  the command line reconfigures its streams (tested with PYTHONIOENCODING=cp1252), and every file
  is opened with an encoding (ruff's PLW1514, pyproject.toml).
* Apple's GPU (MPS): ``precision: auto`` trains in fp32 there, and the tests run the lessons on the
  CPU their outputs were stored from (TRANSFORMER_LIB_DEVICE, set by conftest.py).
* Processes: nothing in the package leans on the platform's way of starting a process (``fork``
  on Linux, ``spawn`` on macOS and Windows). The sweep and ``torchrun`` start fresh interpreters;
  the grader forks each submission's process from a forkserver it names, where the platform has
  one (Linux, macOS), and starts a fresh interpreter where it has none (Windows). Both ways are
  tested (tests/coursework/test_coursework.py); no code calls ``os.fork``.
* Signals: Windows has no SIGALRM; the exercises' and assignments' time limits are then skipped
  (the grader of record, Gradescope, runs Linux).
"""

import ast
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from transformer_lib.coursework.checks import time_limit
from transformer_lib.errors import InvalidValue
from transformer_lib.training import Precision, resolve_precision
from transformer_lib.utils import DEVICE_ENV, pick_device

ROOT = Path(__file__).resolve().parents[2]


def test_the_command_line_speaks_utf8_on_a_cp1252_console(tmp_path):
    """A message naming a file with characters cp1252 lacks: one UTF-8 line, not a UnicodeEncodeError."""
    env = {**os.environ, "PYTHONIOENCODING": "cp1252"}
    name = str(tmp_path / "Übersetzung→第一.txt")
    out = subprocess.run(
        [sys.executable, "-m", "transformer_lib", "score", name, "--split", "val", "--tgt", "en"],
        capture_output=True,
        env=env,
        cwd=ROOT,
    )
    err = out.stderr.decode("utf-8")
    assert out.returncode == 2 and "Traceback" not in err, err
    assert "Übersetzung→第一.txt" in err and err.count("\n") == 1


def test_auto_precision_on_apple_silicon_is_fp32():
    assert resolve_precision("auto", "mps") == "fp32"
    assert resolve_precision("bf16", "mps") == "fp32"  # a GPU recipe on a Mac: fp32, as on a CPU
    with pytest.raises(InvalidValue, match="needs a CUDA GPU"):
        resolve_precision("fp16", "mps")
    amp = Precision("auto", torch.device("mps"))  # builds without MPS: nothing to autocast or scale
    assert amp.name == "fp32" and not amp.scaler.is_enabled()


def test_the_device_variable_wins_over_a_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setenv(DEVICE_ENV, "cpu")
    assert pick_device() == torch.device("cpu")
    monkeypatch.delenv(DEVICE_ENV)
    assert pick_device() == torch.device("cuda")
    monkeypatch.setenv(DEVICE_ENV, "gpu")
    with pytest.raises(InvalidValue, match="use cpu, cuda, cuda:N or mps"):
        pick_device()


def test_a_runs_record_names_the_cpus_vector_instructions():
    """Two CPUs of one name can differ in speed by a factor of two (AVX-512, or AVX2 only):
    environment.json records what PyTorch's kernels use, which ATEN_CPU_CAPABILITY lowers."""
    code = "import torch; from transformer_lib.utils import environment; print(environment(torch.device('cpu')))"
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default"}
    emulated = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert "'cpu_capability': 'DEFAULT'" in emulated.stdout


def test_the_tests_run_the_lessons_on_the_cpu():
    assert os.environ[DEVICE_ENV] == "cpu"  # conftest.py; the notebooks' kernels inherit it


def test_nothing_in_the_package_leans_on_the_platforms_start_method():
    """A module that uses ``multiprocessing`` names its context and says what happens without it."""
    for path in sorted((ROOT / "transformer_lib").rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            if any(n.split(".")[-1] == "multiprocessing" for n in names):
                assert 'get_context("forkserver")' in source and "get_all_start_methods()" in source, path
                assert not re.search(r"multiprocessing\.(Process|Pool)\(", source), path  # the default context
            if isinstance(node, ast.Attribute) and node.attr in ("fork", "forkpty"):
                raise AssertionError(f"{path}: os.{node.attr}")


def test_a_time_limit_without_sigalrm_lets_the_code_run(monkeypatch):
    monkeypatch.delattr(signal, "setitimer")
    with time_limit(0.01):
        total = sum(range(1000))
    assert total == 499500
