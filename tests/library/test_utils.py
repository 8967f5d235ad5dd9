import os
import subprocess
import sys

import pytest
import torch

from transformer_lib import setup


def test_setup_makes_random_draws_repeatable(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    setup(seed=3)
    a = torch.randn(4)
    setup(seed=3)
    assert torch.equal(a, torch.randn(4))
    assert torch.get_num_threads() == 2


def test_setup_respects_the_readers_thread_count(monkeypatch):
    before = torch.get_num_threads()
    try:
        monkeypatch.setenv("OMP_NUM_THREADS", "1")
        setup(seed=0, threads=2)
        assert torch.get_num_threads() == 1
        monkeypatch.setenv("OMP_NUM_THREADS", "not a number")  # ignored, as OpenMP ignores it
        setup(seed=0, threads=2)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("chosen", [None, "/somewhere/of/the/readers"])
def test_an_emulated_cpu_compiles_into_a_cache_of_its_own(chosen):
    """torch.compile's disk cache, shared by the machine's runs, served a kernel built for AVX-512 to
    a run emulating AVX2 (wrong values): an emulated CPU gets its own folder, unless the reader chose one."""
    code = "import os\nfrom transformer_lib import setup\nsetup()\nprint(os.environ.get('TORCHINDUCTOR_CACHE_DIR'))\n"
    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}
    env["ATEN_CPU_CAPABILITY"] = "avx2"
    if chosen:
        env["TORCHINDUCTOR_CACHE_DIR"] = chosen
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    folder = result.stdout.strip()
    assert folder == chosen if chosen else folder.endswith("_emulating_avx2"), result.stderr[-500:]
    plain = {k: v for k, v in env.items() if k not in ("ATEN_CPU_CAPABILITY", "TORCHINDUCTOR_CACHE_DIR")}
    result = subprocess.run([sys.executable, "-c", code], env=plain, capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "None", result.stderr[-500:]  # a real CPU: PyTorch's own default


def test_setup_keeps_compiled_code_vectorised_when_aten_is_emulating_an_older_cpu():
    """Under ATEN_CPU_CAPABILITY=default, torch.compile would generate scalar C++ that does not build."""
    code = (
        "from transformer_lib import setup\n"
        "from torch._inductor import config\n"
        "from torch._inductor.cpu_vec_isa import valid_vec_isa_list\n"
        "setup()\n"
        "available = valid_vec_isa_list()\n"
        "print(config.cpp.simdlen == (available[0].bit_width() if available else None))\n"
    )
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "True", result.stderr[-500:]
