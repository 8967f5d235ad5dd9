"""Every lesson's install cell and Colab badge, written for one version of the book.

    python .ci/install_cell.py write [--ref REF] [NOTEBOOK ...]  # rewrite them (default: every notebooks/*.ipynb, main)
    python .ci/install_cell.py check [--ref REF] [NOTEBOOK ...]  # fail unless each is what write would make

A lesson opened on Colab has nothing of this repository but itself: its first code cell installs
the book's package, the distribution ``transformer-book`` (its import name is ``transformer_lib``),
and its badge opens the lesson on GitHub. On main both follow main; a release's copy of the lessons
(``.ci/release.py``) points both at its tag, so a course that pins a tag gets that tag's package.

PyPI's ``transformer_lib`` (or ``transformer-lib``) is someone else's package with the same import
name. The cell therefore asks which distribution provides the importable ``transformer_lib``
(``importlib.metadata.packages_distributions``): none, it installs the book's; another one, it stops
with one line saying what to uninstall.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
DISTRIBUTION = "transformer-book"
MAIN = "main"
BADGE = re.compile(r"(https://colab\.research\.google\.com/github/[\w.-]+/[\w.-]+/blob/)([\w.-]+)(/notebooks/)")

# The cell, formatted as ruff formats it (notebooks/ruff.toml: 88 columns); <URL> is the repository's
# git address, with @REF for anything but main.
CELL = """\
# This book's package, transformer-book (imported as transformer_lib): installed when
# missing, as on Colab. PyPI's transformer_lib is another project's, with that import name.
import importlib.metadata
import subprocess
import sys

owners = importlib.metadata.packages_distributions().get("transformer_lib", [])
others = [n for n in owners if n.lower().replace("_", "-") != "<DISTRIBUTION>"]
if not owners:
    url = "<URL>"
    pip = [sys.executable, "-m", "pip", "install", "-q"]
    subprocess.run([*pip, f"<DISTRIBUTION>[book] @ {url}"], check=True)
elif others:

    class OtherPackage(Exception):
        def _render_traceback_(self):  # one line in a notebook, not a traceback
            return [f"OtherPackage: {self}"]

    raise OtherPackage(
        f"this transformer_lib is another package's ({others[0]}), not this book's: "
        f"run pip uninstall -y {others[0]}, restart the kernel and run this cell again"
    )"""


def repository() -> str:
    """https://github.com/OWNER/NAME, from _config.yml (where .ci/repository.py sets it)."""
    return yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["repository"]["url"]


def cell_source(ref: str, repo: str | None = None) -> str:
    """The install cell's source for ``ref`` (a branch or a tag)."""
    url = f"git+{repo or repository()}" + ("" if ref == MAIN else f"@{ref}")
    return CELL.replace("<URL>", url).replace("<DISTRIBUTION>", DISTRIBUTION)


def lines(source: str) -> list[str]:
    """A cell's source as a notebook file stores it: lines that keep their newline."""
    return source.splitlines(keepends=True)


def rewritten(notebook: dict, name: str, ref: str, repo: str | None = None) -> dict:
    """``notebook`` with its first code cell the install cell for ``ref`` and its Colab badge on ``ref``."""
    code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    if not code or "pip" not in "".join(code[0]["source"]):
        raise SystemExit(f"{name}: its first code cell is not an install cell (it runs no pip)")
    code[0]["source"] = lines(cell_source(ref, repo))
    badges = 0
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown":
            text = "".join(cell["source"])
            new, count = BADGE.subn(lambda m: m.group(1) + ref + m.group(3), text)
            badges += count
            cell["source"] = lines(new)
    if badges == 0:
        raise SystemExit(f"{name}: no Colab badge")
    return notebook


def dump(notebook: dict) -> str:
    return json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"  # as Jupyter writes it


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("command", choices=["write", "check"])
    parser.add_argument("--ref", default=MAIN, help="a branch or tag: main, or vX.Y.Z (default: main)")
    parser.add_argument("notebooks", nargs="*", type=Path)
    args = parser.parse_intermixed_args(argv)
    if not re.fullmatch(r"main|v\d+\.\d+\.\d+", args.ref):
        print(f"--ref takes main or a release tag like v0.3.0, got {args.ref!r}", file=sys.stderr)
        return 2
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))  # the lessons and the appendix
    stale = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        new = dump(rewritten(json.loads(text), path.name, args.ref))
        if args.command == "write" and new != text:
            path.write_text(new, encoding="utf-8")
        elif args.command == "check" and new != text:
            stale.append(path.name)
    if stale:
        print(f"not on {args.ref}: {', '.join(stale)}: run python .ci/install_cell.py write --ref {args.ref}")
        return 1
    print(f"{len(paths)} notebooks: install cells and Colab badges on {args.ref}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
