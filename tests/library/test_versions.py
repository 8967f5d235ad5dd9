"""The supported range: an older Python or PyTorch is one line on import, and the bounds are what was tested.

The bounds live in ``transformer_lib/versions.py``; ``pyproject.toml`` declares the same, and
``results/matrix.json`` (written by ``.ci/matrix.py``) shows an entry at those bounds that passed.
"""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from transformer_lib.versions import MIN_PYTHON, MIN_TORCH, release

ROOT = Path(__file__).parents[2]
RECORDS = ROOT / "results" / "matrix.json"
# What .ci/matrix.py writes: checked in CI, not by the matrix's own runs (they are writing it).
MATRIX = json.loads(RECORDS.read_text(encoding="utf-8")) if RECORDS.exists() else []


def import_after(setup: str) -> subprocess.CompletedProcess:
    """``import transformer_lib`` from this checkout in a new interpreter, after ``setup`` ran."""
    code = f"{setup}\nimport transformer_lib"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_release_reads_major_and_minor():
    assert release("2.5.1+cu124") == (2, 5)
    assert release("2.15.0") == (2, 15)
    assert release("2.10.0a0+git1234") == (2, 10)
    assert release("2.13.0+cpu") > release("2.9.1")  # numbers, not strings: "13" > "9"


def test_an_older_pytorch_is_one_line_naming_the_version_needed():
    major, minor = MIN_TORCH
    older = f"{major}.{minor - 1}.1"
    result = import_after(f"import torch; torch.__version__ = '{older}'")
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    need = f"{major}.{minor}"
    assert last.startswith(f"transformer_lib.errors.UnsupportedVersion: transformer_lib needs PyTorch {need} or newer")
    assert f"this is PyTorch {older}" in last and f'pip install --upgrade "torch>={need}"' in last


def test_an_older_python_is_one_line_naming_the_version_needed():
    major, minor = MIN_PYTHON
    result = import_after(f"import sys; sys.version_info = ({major}, {minor - 1}, 18, 'final', 0)")
    last = result.stderr.strip().splitlines()[-1]
    assert f"needs Python {major}.{minor} or newer, and this is Python {major}.{minor - 1}.18" in last


def test_a_real_python_3_9_gets_the_line_not_a_syntax_error():
    """The check runs before any of the package's newer syntax: an old Python really reaches it."""
    old = next((p for p in sorted((Path.home() / ".pyenv/versions").glob("3.9.*/bin/python"))), None)
    old = str(old) if old else shutil.which("python3.9")
    if old is None:
        pytest.skip("no Python 3.9 on this machine")
    result = subprocess.run([old, "-c", "import transformer_lib"], cwd=ROOT, capture_output=True, text=True)
    assert "needs Python {}.{} or newer".format(*MIN_PYTHON) in result.stderr.strip().splitlines()[-1]


def test_in_a_notebook_the_error_is_one_line():
    from transformer_lib.errors import UnsupportedVersion

    assert UnsupportedVersion("transformer_lib needs PyTorch 2.5")._render_traceback_() == [
        "UnsupportedVersion: transformer_lib needs PyTorch 2.5"
    ]


def test_pyproject_declares_the_same_bounds():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")  # read as text: tomllib needs Python 3.11
    assert re.findall(r'^requires-python = "(.*)"$', pyproject, re.M) == [">={}.{}".format(*MIN_PYTHON)]
    assert re.findall(r'"(torch\b[^"]*)"', pyproject) == ["torch>={}.{}".format(*MIN_TORCH)]


@pytest.mark.matrix_record
def test_the_bounds_are_an_entry_of_the_matrix_that_passed():
    at_bounds = [r for r in MATRIX if release(r["python"]) == MIN_PYTHON and release(r["torch"]) == MIN_TORCH]
    assert at_bounds, "results/matrix.json has no entry at the bounds: run python .ci/matrix.py"
    assert all(r["outcome"] == "passed" for r in at_bounds)
    assert all(release(r["python"]) >= MIN_PYTHON and release(r["torch"]) >= MIN_TORCH for r in MATRIX)


@pytest.mark.matrix_record
@pytest.mark.parametrize("record", MATRIX, ids=lambda r: r["entry"])
def test_every_matrix_entry_passed_and_the_how_to_run_page_names_it(record):
    assert record["outcome"] == "passed", f"{record['entry']}: {record['runs']}"
    assert all(run["failed"] == 0 and run["passed"] > 0 for run in record["runs"])
    page = (ROOT / "book" / "how_to_run.md").read_text(encoding="utf-8")
    running = page.split("### Versions and systems")[1].split("\n#")[0]
    running = " ".join(running.split())  # as it reads, whatever the line breaks
    python, torch = ".".join(record["python"].split(".")[:2]), record["torch"].split("+")[0]
    assert f"Python {python}" in running and f"PyTorch {torch}" in running
