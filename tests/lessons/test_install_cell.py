"""Every lesson's and assignment's install cell installs the book's package and refuses another of its import name.

PyPI's ``transformer_lib`` is someone else's package that also imports as ``transformer_lib``. The
cell (written by ``.ci/install_cell.py``) asks which distribution provides the importable one.
Each case runs the cell in a fresh interpreter without site-packages (``-S``), on a folder that
holds a fake package and its metadata, so the answer comes from that folder alone.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ci_script

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def install_cell():
    return ci_script("install_cell")


def site(tmp_path: Path, distribution: str | None) -> Path:
    """A folder with an importable transformer_lib, installed by ``distribution`` (None: no metadata)."""
    (tmp_path / "transformer_lib").mkdir()
    (tmp_path / "transformer_lib" / "__init__.py").write_text("", encoding="utf-8")
    if distribution:
        info = tmp_path / f"{distribution.replace('-', '_')}-0.1.0.dist-info"
        info.mkdir()
        metadata = f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.1.0\n"
        (info / "METADATA").write_text(metadata, encoding="utf-8")
        (info / "top_level.txt").write_text("transformer_lib\n", encoding="utf-8")
    return tmp_path


def run_cell(source: str, folder: Path) -> subprocess.CompletedProcess:
    """The cell in a new interpreter that sees only ``folder``; pip is not run but printed."""
    fake_pip = (
        "import sys, types\n"
        "fake = types.ModuleType('subprocess')\n"
        "fake.run = lambda command, check: print('RUN', command[-1])\n"
        "sys.modules['subprocess'] = fake\n"
    )
    return subprocess.run(
        [sys.executable, "-S", "-c", fake_pip + source],
        cwd=folder,
        env={"PYTHONPATH": str(folder)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_this_books_package_is_left_alone(install_cell, tmp_path):
    result = run_cell(install_cell.cell_source("main"), site(tmp_path, "transformer-book"))
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""  # nothing installed


def test_another_package_of_the_same_import_name_is_one_line_saying_what_to_do(install_cell, tmp_path):
    result = run_cell(install_cell.cell_source("main"), site(tmp_path, "transformer_lib"))
    assert result.returncode == 1 and "RUN" not in result.stdout
    last = result.stderr.strip().splitlines()[-1]
    assert last == (
        "OtherPackage: this transformer_lib is another package's (transformer_lib), not this book's: "
        "run pip uninstall -y transformer_lib, restart the kernel and run this cell again"
    )


def test_in_a_notebook_the_refusal_is_that_one_line(install_cell, tmp_path):
    namespace: dict = {}
    source = install_cell.cell_source("main").replace("raise OtherPackage(", "error = OtherPackage(")
    source = source.replace("if not owners:", "if False:")
    # another package provides transformer_lib, whatever this environment holds
    asked = 'owners = importlib.metadata.packages_distributions().get("transformer_lib", [])'
    assert asked in source
    source = source.replace(asked, 'owners = ["transformer_lib"]')
    exec(compile(source, "cell", "exec"), namespace)
    lines = namespace["error"]._render_traceback_()  # what IPython prints instead of a traceback
    assert len(lines) == 1 and lines[0].startswith("OtherPackage: this transformer_lib is another package's")


@pytest.mark.parametrize(("ref", "suffix"), [("main", ""), ("v0.3.0", "@v0.3.0")])
def test_without_it_the_cell_installs_the_book_at_its_version(install_cell, tmp_path, ref, suffix):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run_cell(install_cell.cell_source(ref), empty)
    repo = install_cell.repository()
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"RUN transformer-book[book] @ git+{repo}{suffix}\n"


def test_the_distribution_name_is_pyprojects():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'name = "transformer-book"' in pyproject.split("[project]\n")[1].split("\n[")[0]


def notebook(tmp_path: Path) -> Path:
    """A copy of lesson 1."""
    copy = tmp_path / "01_why_attention.ipynb"
    copy.write_text((ROOT / "notebooks" / "01_why_attention.ipynb").read_text(encoding="utf-8"), encoding="utf-8")
    return copy


def test_a_release_points_the_badge_and_the_install_at_its_tag(install_cell, tmp_path):
    copy = notebook(tmp_path)
    assert install_cell.main(["write", "--ref", "v0.3.0", str(copy)]) == 0
    assert install_cell.main(["check", "--ref", "v0.3.0", str(copy)]) == 0
    assert install_cell.main(["check", "--ref", "main", str(copy)]) == 1
    text = copy.read_text(encoding="utf-8")
    assert "/blob/v0.3.0/notebooks/01_why_attention.ipynb" in text and "/blob/main/" not in text
    cells = json.loads(text)["cells"]
    first = next(c for c in cells if c["cell_type"] == "code")
    assert "".join(first["source"]) == install_cell.cell_source("v0.3.0")
    assert first["metadata"]["tags"] == ["remove-cell"]  # the site still leaves it out
    assert install_cell.main(["write", str(copy)]) == 0  # and back to main
    assert "/blob/main/notebooks/01_why_attention.ipynb" in copy.read_text(encoding="utf-8")


def test_a_ref_that_is_no_release_is_refused(install_cell, tmp_path, capsys):
    assert install_cell.main(["write", "--ref", "0.3", str(notebook(tmp_path))]) == 2
    assert "--ref takes main or a release tag like v0.3.0" in capsys.readouterr().err


def test_every_notebook_installs_this_books_package_from_main(install_cell):
    """Every lesson and the appendix: the install cell and Colab badge that `write` makes for main."""
    assert install_cell.main(["check"]) == 0


MASTERS = sorted((ROOT / "assignments").glob("a*/a*.ipynb"))


def first_code_cell(notebook: Path) -> str:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return "".join(next(c for c in cells if c["cell_type"] == "code")["source"])


@pytest.mark.parametrize("master", MASTERS, ids=[m.stem for m in MASTERS])
def test_each_assignment_installs_the_book_and_refuses_the_other_package(master, tmp_path):
    """A student's first cell: the book's package is left alone, missing it is installed, another is refused."""
    source = first_code_cell(master)
    for name in ("ours", "empty", "other"):
        (tmp_path / name).mkdir()
    ours = run_cell(source, site(tmp_path / "ours", "transformer-book"))
    assert ours.returncode == 0 and "transformer-book @" not in ours.stdout, ours.stderr
    missing = run_cell(source, tmp_path / "empty")
    assert missing.returncode == 0 and "RUN transformer-book @ git+https://github.com/" in missing.stdout
    other = run_cell(source, site(tmp_path / "other", "transformer_lib"))
    assert other.returncode == 1 and "RUN" not in other.stdout
    assert other.stderr.strip().splitlines()[-1] == (
        "OtherPackage: this transformer_lib is another package's (transformer_lib), not this book's: "
        "run pip uninstall -y transformer_lib, restart the kernel and run this cell again"
    )
