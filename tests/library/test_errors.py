"""The package's errors: catchable as the built-in kinds, and one line in a notebook."""

import pytest
from IPython.core.interactiveshell import InteractiveShell

from transformer_lib import InvalidValue, MultiHeadAttention, TrainConfig, TransformerLibError


def test_errors_are_the_builtin_kinds_callers_expect():
    with pytest.raises(ValueError, match="divisible by n_heads"):
        MultiHeadAttention(d_model=512, n_heads=6)
    with pytest.raises(TransformerLibError):
        TrainConfig(epochs=0)


def test_a_notebook_shows_one_line_without_paths(capsys):
    shell = InteractiveShell.instance()
    result = shell.run_cell("from transformer_lib import TrainConfig\nTrainConfig(epochs=0)")
    assert isinstance(result.error_in_exec, InvalidValue)
    shown = capsys.readouterr()
    lines = [line for line in (shown.out + shown.err).splitlines() if line.strip()]
    assert lines == ["InvalidValue: epochs must be a positive integer, got 0"], lines
