"""Every Python the README names can install requirements.txt: a resolve per Python, nothing installed.

    python .ci/resolve.py          # Python 3.10 to 3.13 (PYTHONS), one pip resolve each
    python .ci/resolve.py 3.10     # one of them

CI installs the book on one Python (3.11). A pin that has no wheel for another Python (as
onnxruntime 1.32 has none for 3.10) would stop a reader's command 1 there, and CI would never see
it. So for each Python, pip resolves the whole of requirements.txt (its ``-r`` includes followed,
environment markers evaluated for that Python, since pip evaluates them for the Python running it)
for Linux x86-64, wheels only, with ``--dry-run``: pip reads each wheel's metadata from the index
(PEP 658), never PyTorch's gigabytes, and installs nothing. The Pythons resolve side by side: about two
minutes on a first run, less once pip's cache has the metadata. The package itself (``-e .``) is left out: its
dependencies are requirements.txt's own lines, pinned tighter.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
PYTHONS = ("3.10", "3.11", "3.12", "3.13")  # pyproject.toml's requires-python up to the newest Python tested


def requirements(path: Path, python: str) -> list[str]:
    """The lines of ``path`` (and the files it includes) that apply on ``python``, without their markers."""
    found = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split("#")[0].strip()
        if line.startswith("-r "):
            found += requirements(path.parent / line.removeprefix("-r ").strip(), python)
        elif line and not line.startswith("-"):  # -e . and other options
            requirement = Requirement(line)
            environment = {"python_version": python, "python_full_version": f"{python}.0"}
            if requirement.marker is None or requirement.marker.evaluate(environment):
                requirement.marker = None
                found.append(str(requirement))
    return found


def resolve(python: str, path: Path = ROOT / "requirements.txt") -> tuple[bool, str]:
    """(resolved, a summary line or pip's error) for ``path`` on ``python``."""
    with tempfile.TemporaryDirectory() as tmp:
        pinned, report = Path(tmp) / "requirements.txt", Path(tmp) / "report.json"
        pinned.write_text("\n".join(requirements(path, python)) + "\n", encoding="utf-8")
        command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet"]
        command += ["--only-binary", ":all:", "--python-version", python, "-r", str(pinned), "--report", str(report)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR")]
            return False, "\n".join(errors) or done.stderr.strip()
        installs = {
            i["metadata"]["name"].lower(): i["metadata"]["version"] for i in json.loads(report.read_text())["install"]
        }
    shown = ", ".join(f"{name} {installs[name]}" for name in ("torch", "numpy", "onnxruntime") if name in installs)
    return True, f"{len(installs)} packages ({shown})"


def main(argv: list[str]) -> int:
    unknown = set(argv) - set(PYTHONS)
    if unknown:
        print(f"no Python {', '.join(sorted(unknown))} here: choose from {', '.join(PYTHONS)}", file=sys.stderr)
        return 2
    pythons = argv or list(PYTHONS)
    with ThreadPoolExecutor(len(pythons)) as pool:  # side by side: each waits on the index, not the CPU
        results = list(pool.map(resolve, pythons))
    failed = []
    for python, (ok, summary) in zip(pythons, results, strict=True):
        print(f"Python {python}: {'resolves' if ok else 'does not resolve'}: {summary}")
        if not ok:
            failed.append(python)
    if failed:
        print(f"requirements.txt does not install on Python {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
