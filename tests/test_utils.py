import torch

from transformer_lib import setup


def test_setup_makes_random_draws_repeatable():
    setup(seed=3)
    a = torch.randn(4)
    setup(seed=3)
    assert torch.equal(a, torch.randn(4))
    assert torch.get_num_threads() == 2
