"""The repository address is set once (_config.yml); every badge and install line must agree."""

import json
import shutil
from pathlib import Path

import pytest

from conftest import ci_script

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def repository():
    return ci_script("repository")


def test_every_use_agrees_with_the_config(repository):
    assert repository.problems() == []


def fake_repo(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "_config.yml", tmp_path / "_config.yml")
    (tmp_path / "notebooks").mkdir()
    badge = "https://colab.research.google.com/github/transformer-book/transformer-book/blob/main/notebooks/01_a.ipynb"
    cell = {"cell_type": "markdown", "metadata": {}, "source": [f"[![Open In Colab](x.svg)]({badge})"]}
    (tmp_path / "notebooks" / "01_a.ipynb").write_text(json.dumps({"cells": [cell]}), encoding="utf-8")
    (tmp_path / "README.md").write_text(
        "pip install git+https://github.com/transformer-book/transformer-book\n"
        "Read it online: https://transformer-book.github.io/transformer-book\n"
        "In a fork: https://github.com/OWNER/NAME/ is published at https://OWNER.github.io/NAME/\n",
        encoding="utf-8",
    )
    return tmp_path


def test_a_use_that_disagrees_is_reported(repository, tmp_path, monkeypatch):
    monkeypatch.setattr(repository, "ROOT", fake_repo(tmp_path))
    assert repository.problems() == []
    (tmp_path / "notebooks" / "01_a.ipynb").rename(tmp_path / "notebooks" / "02_b.ipynb")  # the badge opens 01_a
    (tmp_path / "README.md").write_text(
        "git clone https://github.com/someone/else\n"
        "https://colab.research.google.com/github/someone/else/blob/dev/notebooks/01_a.ipynb\n"
        "https://someone.github.io/else/book/inside.html\n",
        encoding="utf-8",
    )
    assert repository.problems() == [
        "README.md: github.com/someone/else, but _config.yml says transformer-book/transformer-book",
        "README.md: the site someone.github.io/else, but transformer-book/transformer-book is published at "
        "https://transformer-book.github.io/transformer-book/",
        "README.md: a Colab link to someone/else, but _config.yml says transformer-book/transformer-book",
        "README.md: a Colab link on branch dev, but _config.yml says main",
        "notebooks/02_b.ipynb: its Colab badge opens 01_a.ipynb",
    ]


def test_a_fork_sets_its_address_in_one_command(repository, tmp_path, monkeypatch):
    monkeypatch.setattr(repository, "ROOT", fake_repo(tmp_path))
    assert repository.main(["set", "https://github.com/me/fork"]) == 0
    assert repository.configured() == ("me/fork", "main")
    assert "https://me.github.io/fork/" in (tmp_path / "_config.yml").read_text(encoding="utf-8")
    assert "https://me.github.io/fork\n" in (tmp_path / "README.md").read_text(encoding="utf-8")
    assert "google.com/github/me/fork/blob/main/notebooks/01_a.ipynb" in (
        tmp_path / "notebooks" / "01_a.ipynb"
    ).read_text(encoding="utf-8")
    assert repository.problems() == []
