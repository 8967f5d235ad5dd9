"""Shared fixtures: the Multi30k files come from the folder in MULTI30K_DIR (CI sets it)."""

import os
from pathlib import Path

import pytest

from transformer_lib.data import LOCAL_DIR_ENV


@pytest.fixture(scope="session")
def mirror() -> Path:
    folder = os.environ.get(LOCAL_DIR_ENV)
    if not folder:
        pytest.skip(f"set {LOCAL_DIR_ENV} to a folder of Multi30k files to run the data tests")
    return Path(folder)
