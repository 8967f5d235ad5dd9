"""A file a page, a comment or a docstring names is there.

Code moves (the tests were grouped into folders, the tools left the library) and the sentences
that point at it are easy to miss. Every tracked text file is read for paths of code files in this
repository: tests, CI steps, the tools, the library and the lessons. The changelog and the records
in ``results/`` are left out (they say what was true when they were written), and so are the tests,
whose paths are often the fixtures they build.
"""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEXT = (".md", ".py", ".yaml", ".yml", ".ipynb", ".toml", ".cfg", ".txt", ".js", ".sh", ".css", ".cff", ".gitignore")
LEFT_OUT = ("CHANGELOG.md", "results/", "tests/")
CODE_PATH = re.compile(
    r"(?<![\w./-])("
    r"tests/(?:\w+/)?test_\w+\.py"
    r"|\.ci/\w+(?:\.py)?"
    r"|tools/[\w/-]+\.py"
    r"|transformer_lib/[\w/]+\.py"
    r"|notebooks/\d\d_\w+\.ipynb"
    r")(?![\w/-])"
)


def named_paths() -> dict[str, set[str]]:
    """Each code path named in a tracked text file, with the files that name it."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    named: dict[str, set[str]] = {}
    for name in tracked.splitlines():
        if name.startswith(LEFT_OUT) or not (name.endswith(TEXT) or name == ".ci/run"):
            continue
        text = (ROOT / name).read_text(encoding="utf-8", errors="replace")
        for match in CODE_PATH.finditer(text):
            named.setdefault(match.group(1), set()).add(name)
    return named


def test_the_check_reads_paths_as_written():
    found = CODE_PATH.findall("see `tests/site/test_pdf.py` and .ci/run, not notebooks/NN_name.ipynb")
    assert found == ["tests/site/test_pdf.py", ".ci/run"]


def test_every_code_file_a_text_names_exists():
    missing = {path: sorted(by) for path, by in named_paths().items() if not (ROOT / path).exists()}
    assert not missing, "named but not in the repository (path: where it is named):\n" + "\n".join(
        f"{path}: {', '.join(by)}" for path, by in sorted(missing.items())
    )
