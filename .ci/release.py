"""A release's checks and notes, for the release workflow (.github/workflows/release.yml).

    python .ci/release.py check vX.Y.Z   # the tag is the package's version, and CHANGELOG.md has its section
    python .ci/release.py notes vX.Y.Z   # that section, the release's notes on GitHub

The version is written once, in transformer_lib/__init__.py (pyproject.toml reads it).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def version() -> str:
    """``transformer_lib.__version__``, read without importing the package (no PyTorch needed)."""
    tree = ast.parse((ROOT / "transformer_lib" / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__version__"]:
            return ast.literal_eval(node.value)
    raise SystemExit("transformer_lib/__init__.py sets no __version__")


def section(number: str) -> str | None:
    """The CHANGELOG.md section of version ``number`` (without its heading), or None."""
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(number)}\b.*?\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    return match.group(1).strip() if match else None


def problems(tag: str) -> list[str]:
    found = []
    if tag != f"v{version()}":
        found.append(f"the tag {tag} is not the package's version v{version()} (transformer_lib/__init__.py)")
    if section(tag.removeprefix("v")) is None:
        found.append(f"CHANGELOG.md has no section '## {tag.removeprefix('v')}'")
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("check", "notes"):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    command, tag = argv
    found = problems(tag)
    if found:
        print("\n".join(found), file=sys.stderr)
        return 1
    print(section(tag.removeprefix("v")) if command == "notes" else f"{tag}: the version, with its changes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
