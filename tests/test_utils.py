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
