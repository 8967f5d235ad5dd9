"""The oldest Python and PyTorch the package supports, checked when it is imported.

An older PyTorch would fail deep inside a lesson: SDPA's ``enable_gqa``, which grouped-query
attention uses, arrived in 2.5, and 2.5's ONNX exporter writes an invalid graph of the translator
where 2.6's writes a correct one. The check says in one line which version is needed instead.
The bounds are those of the oldest entry of ``.ci/matrix.py`` that passed (``results/matrix.json``),
and ``pyproject.toml`` declares the same (``tests/library/test_versions.py`` checks that the three agree).

Importing this module runs both checks; the package imports it before anything else, so it
must parse on old Pythons.
"""

from __future__ import annotations

import re
import sys

MIN_PYTHON = (3, 10)
MIN_TORCH = (2, 6)


def release(version: str) -> tuple[int, int]:
    """(major, minor) of a version string: "2.5.1+cu124" -> (2, 5)."""
    match = re.match(r"(\d+)\.(\d+)", version)
    if match is None:
        raise ValueError(f"not a version: {version!r}")
    return int(match.group(1)), int(match.group(2))


def check_python() -> None:
    """Raise UnsupportedVersion, in one line, below MIN_PYTHON."""
    from transformer_lib.errors import UnsupportedVersion

    if sys.version_info[:2] < MIN_PYTHON:
        need, have = ".".join(map(str, MIN_PYTHON)), ".".join(map(str, sys.version_info[:3]))
        raise UnsupportedVersion(
            f"transformer_lib needs Python {need} or newer, and this is Python {have}: "
            f"run it in an environment with a newer Python (Colab's is new enough)"
        )


def check_torch() -> None:
    """Raise UnsupportedVersion, in one line, below MIN_TORCH."""
    import torch

    from transformer_lib.errors import UnsupportedVersion

    if release(torch.__version__) < MIN_TORCH:
        need = ".".join(map(str, MIN_TORCH))
        raise UnsupportedVersion(
            f"transformer_lib needs PyTorch {need} or newer, and this is PyTorch {torch.__version__}: "
            f'upgrade it (pip install --upgrade "torch>={need}") and restart the kernel or interpreter'
        )


check_python()
check_torch()
