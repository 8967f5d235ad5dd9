"""What readers see in the stored outputs: no machine's paths, and deliberate errors as one line."""

import ast
import json
import re
from pathlib import Path
from types import SimpleNamespace

import nbformat
import nbval.kernel
import pytest

NOTEBOOKS = sorted((Path(__file__).parents[2] / "notebooks").glob("*.ipynb"))
SHARED_LINES = 6  # lines of code two lessons may not share
MACHINE_PATH = re.compile(r"(/home/|/root/|/tmp/|/work/|/Users/|/private/var/|site-packages|[A-Z]:\\\\)")


def outputs(notebook: Path):
    for index, cell in enumerate(json.loads(notebook.read_text(encoding="utf-8"))["cells"]):
        for output in cell.get("outputs", []):
            yield index, cell, output


def shown_text(output: dict) -> str:
    parts = [output.get("text", ""), output.get("evalue", ""), *output.get("traceback", [])]
    for kind, value in output.get("data", {}).items():
        if kind.startswith("text/"):
            parts.append(value)
    return "\n".join("".join(p) if isinstance(p, list) else p for p in parts)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_no_stored_output_shows_a_machine_path(notebook):
    for index, _, output in outputs(notebook):
        match = MACHINE_PATH.search(shown_text(output))
        assert match is None, f"cell {index} shows a path of the machine that ran it: {match.group(0)!r}"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_deliberate_errors_show_one_line(notebook):
    for index, cell, output in outputs(notebook):
        if output["output_type"] == "error":
            assert "raises-exception" in cell["metadata"].get("tags", []), f"cell {index} failed"
            assert len(output["traceback"]) == 1, f"cell {index} shows a {len(output['traceback'])}-line traceback"


MARKDOWN_IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)")
MARKDOWN_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)")  # not an image


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_images_render_where_the_notebook_is_opened_alone(notebook):
    """Colab, GitHub or a download has no ../book: a relative image would show as a broken icon.

    The Colab badge is Colab's own image; the site serves its copy (book/_ext/site_fixes.py).
    """
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    for index, cell in enumerate(cells):
        if cell["cell_type"] == "markdown":
            for source in MARKDOWN_IMAGE.findall("".join(cell["source"])):
                assert source.startswith("https://"), f"cell {index} shows an image by a relative path: {source}"
    assert "(https://colab.research.google.com/assets/colab-badge.svg)" in "".join(cells[0]["source"])


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_links_work_where_the_notebook_is_opened_alone(notebook):
    """A lesson links to another lesson by its file (beside it everywhere) and to the book's other
    pages by the site's address, which the site turns back into a link to its own page
    (book/_ext/site_fixes.py); a relative ../book/page.md link is dead on Colab."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    for index, cell in enumerate(cells):
        if cell["cell_type"] == "markdown":
            for target in MARKDOWN_LINK.findall("".join(cell["source"])):
                page = target.split("#")[0]
                lesson = page.endswith(".ipynb") and "/" not in page
                assert target.startswith(("https://", "http://", "mailto:", "#")) or lesson, (
                    f"cell {index} links to {target}: give another lesson's .ipynb file or the site's address"
                )


def code_cells(notebook: Path) -> list[dict]:
    return [c for c in json.loads(notebook.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]


def test_every_lesson_opens_with_the_same_install_cell_hidden_on_the_site():
    """One source for the install cell: every lesson's first code cell is the same, and the site removes it.

    On Colab it installs the package (.ci/colab.py runs each lesson alone); on the website it is
    noise, so it carries Jupyter Book's remove-cell tag. The lesson's own set-up follows it.
    """
    first = {notebook.name: code_cells(notebook)[0] for notebook in NOTEBOOKS}
    sources = {"".join(cell["source"]) for cell in first.values()}
    assert len(sources) == 1, "the lessons' install cells differ: keep them identical"
    source = sources.pop()  # .ci/install_cell.py writes it; tests/lessons/test_install_cell.py runs it
    assert 'packages_distributions().get("transformer_lib"' in source and "transformer-book[book] @ " in source
    assert all(cell["metadata"].get("tags") == ["remove-cell"] and not cell["outputs"] for cell in first.values())
    assert all("setup(seed=0" in "".join(code_cells(n)[1]["source"]) for n in NOTEBOOKS)


def test_no_long_code_cell_appears_in_two_notebooks():
    """A block of code needed twice lives once, in the package, and both notebooks call it.

    Every code cell of at least 10 lines is compared across the notebooks, white space at line ends
    ignored; the install cell, the same in every lesson on purpose (the test above), is left out.
    """
    seen: dict[str, str] = {}
    repeated = []
    for notebook in NOTEBOOKS:
        for index, cell in enumerate(code_cells(notebook)[1:], start=1):
            lines = [line.rstrip() for line in "".join(cell["source"]).strip().splitlines()]
            if sum(1 for line in lines if line) < 10:
                continue
            key, place = "\n".join(lines), f"{notebook.name}, code cell {index}"
            if key in seen and not seen[key].startswith(f"{notebook.name},"):
                repeated.append(f"{place} repeats {seen[key]}")
            seen.setdefault(key, place)
    assert not repeated, "move the shared code into the package and call it from both: " + "; ".join(repeated)


class _Kernels:
    """Stands in for jupyter_client's KernelManager: the first `deaths` kernels die at start."""

    def __init__(self, deaths: int):
        self.deaths, self.started = deaths, []

    def __call__(self, **kwargs):
        self.started.append(kwargs)
        dies = len(self.started) <= self.deaths
        client = SimpleNamespace(start_channels=lambda: None, stop_channels=lambda: None)

        def wait_for_ready(timeout):
            if dies:
                raise RuntimeError("Kernel died before replying to kernel_info")

        client.wait_for_ready = wait_for_ready
        return SimpleNamespace(start_kernel=lambda **_: None, client=lambda: client, shutdown_kernel=lambda: None)


def test_a_kernel_that_dies_at_start_is_started_again(monkeypatch):
    """The root conftest makes nbval start a lesson's kernel again when it dies at start (two xdist
    workers can race for one port), up to three tries; a kernel that always dies still fails."""
    kernels = _Kernels(deaths=2)
    monkeypatch.setattr(nbval.kernel, "KernelManager", kernels)
    manager, _ = nbval.kernel.start_new_kernel(kernel_name="python3")
    assert len(kernels.started) == 3 and manager is not None

    kernels = _Kernels(deaths=3)
    monkeypatch.setattr(nbval.kernel, "KernelManager", kernels)
    with pytest.raises(RuntimeError, match="Kernel died"):
        nbval.kernel.start_new_kernel(kernel_name="python3")
    assert len(kernels.started) == 3


def code_lines(cell_source: str) -> list[str]:
    """A code cell's lines that do something: no imports, comments, blank lines or shell commands."""
    lines = [re.sub(r"^(\s*)[!%].*", r"\1pass", line) for line in cell_source.splitlines()]
    tree = ast.parse("\n".join(lines))
    imports = {
        number
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for number in range(node.lineno, node.end_lineno + 1)
    }
    return [
        line.strip()
        for number, line in enumerate(cell_source.splitlines(), 1)
        if number not in imports and line.strip() and not line.strip().startswith(("#", "!", "%"))
    ]


def test_no_code_block_appears_in_two_lessons():
    """Six lines of code shared by two lessons belong in the package, written once (the install
    cell, which .ci/install_cell.py writes into every lesson, and imports apart). Lines are compared
    within a cell: a block split across two cells is not seen."""
    seen: dict[tuple[str, ...], str] = {}
    for path in NOTEBOOKS:
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type != "code" or "remove-cell" in cell.metadata.get("tags", []):
                continue
            lines = code_lines(cell.source)
            for start in range(len(lines) - SHARED_LINES + 1):
                block = tuple(lines[start : start + SHARED_LINES])
                other = seen.setdefault(block, path.name)
                assert other == path.name, f"{path.name} repeats these lines of {other}:\n" + "\n".join(block)
