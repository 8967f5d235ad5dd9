"""The package's tests on the oldest and newest PyTorch and Python it supports; run before each release.

    python .ci/matrix.py                 # every entry below, then write results/matrix.json
    python .ci/matrix.py 3.10-2.6.0      # one entry (PYTHON-TORCH)

CI runs one environment (Python 3.11, PyTorch 2.13's small CPU build). PyPI offers other PyTorch
releases for Linux only as CUDA builds of several gigabytes, and those cost minutes to install,
so the ends of the range are checked here, before a release, not in every CI run. Each entry gets
its own virtual environment under ``.matrix/`` (reused on the next run), that PyTorch, the package
with its extras at the ranges ``pyproject.toml`` declares (not requirements.txt's pins, which are
the book's own environment on Python 3.11) and the test tools, and runs ``tests/`` (and, where
marked, every lesson under nbval, whose asserted claims must hold on the newest PyTorch too).
``results/matrix.json`` keeps, per entry, the versions, the commit, the date, the machine and what
passed; ``pyproject.toml``'s bounds are the oldest entry that passed (tests/library/test_versions.py checks
that). Set ``MULTI30K_DIR`` as for the tests.

The matrix asks pip for exact PyTorch releases, so pip runs without this machine's configuration
files (a cap on torch releases there would refuse them).
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results" / "matrix.json"
VENVS = ROOT / ".matrix"
# the test tools, at requirements.txt's versions
TEST_TOOLS = {"pytest", "pytest-xdist", "nbval", "nbclient", "hypothesis", "ipykernel", "pytest-playwright"}


@dataclass(frozen=True)
class Entry:
    python: str  # minor version: "3.10"
    torch: str  # exact release: "2.5.1"
    why: str
    notebooks: bool = False  # also every lesson under nbval

    @property
    def name(self) -> str:
        return f"{self.python}-{self.torch}"


ENTRIES = [
    Entry("3.10", "2.6.0", "the oldest supported: Python 3.10, and PyTorch 2.6 (2.5's ONNX exporter fails)"),
    Entry("3.12", "2.15.0", "the newest PyTorch release, on the Python that Colab runs", notebooks=True),
    Entry("3.13", "2.15.0", "the newest Python, with the newest PyTorch release", notebooks=True),
]


def interpreter(minor: str) -> str:
    """A Python of that minor version: pyenv's, else python3.X on the PATH."""
    pyenv = Path.home() / ".pyenv" / "versions"
    for folder in sorted(pyenv.glob(f"{minor}.*"), reverse=True):
        if (folder / "bin" / "python").exists():
            return str(folder / "bin" / "python")
    return f"python{minor}"


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    print("$", " ".join(command), flush=True)
    return subprocess.run(command, check=True, **kwargs)


def requirement_lines(path: Path) -> list[str]:
    """The requirements of a requirements file, without comments, following its ``-r`` includes."""
    found = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].strip()
        if line.startswith("-r "):
            found += requirement_lines(path.parent / line.removeprefix("-r ").strip())
        elif line:
            found.append(line)
    return found


def prepare(entry: Entry) -> Path:
    """The entry's virtual environment with its PyTorch and the book's other requirements."""
    venv = VENVS / entry.name
    python = venv / "bin" / "python"
    if not python.exists():
        run([interpreter(entry.python), "-m", "venv", str(venv)])
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull}
    pip = [str(python), "-m", "pip", "install", "--quiet"]
    run([*pip, "--upgrade", "pip"], env=env)
    # The package was once installed as the distribution transformer_lib; beside transformer-book it
    # would make the lessons' install cell refuse the environment (two owners of transformer_lib).
    run([str(python), "-m", "pip", "uninstall", "--yes", "--quiet", "transformer_lib"], env=env)
    tools = [
        line for line in requirement_lines(ROOT / "requirements.txt") if re.split(r"[=<>~ ;]", line)[0] in TEST_TOOLS
    ]
    with tempfile.TemporaryDirectory() as tmp:
        constraints = Path(tmp) / "constraints.txt"
        constraints.write_text(f"torch=={entry.torch}\n", encoding="utf-8")
        run([*pip, f"torch=={entry.torch}"], env=env)
        # the package at its declared ranges, and the book's tools, which the tests use too
        run([*pip, "-c", str(constraints), "-e", f"{ROOT}[book,onnx]", "-e", str(ROOT / "tools"), *tools], env=env)
    return python


def pytest(python: Path, paths: list[str]) -> dict:
    """Run pytest on ``paths`` with the entry's Python; counts of passed, failed, skipped."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        start = time.perf_counter()
        command = [str(python), "-m", "pytest", "-n", "2", "--dist", "loadfile", "-p", "no:cacheprovider"]
        command += ["-m", "not matrix_record"]  # the checks of the file this run is writing
        # torch.compile's kernels in a cache of the entry's own: the default folder is shared by every
        # PyTorch of the machine (lesson 12 failed under 2.13 with 'tuple args required' after this ran 2.15)
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(python.parent.parent / "inductor-cache")}
        completed = subprocess.run([*command, f"--junitxml={report}", *paths], cwd=ROOT, env=env)
        seconds = round(time.perf_counter() - start)
        suites = ET.parse(report).getroot().iter("testsuite") if report.exists() else []
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for suite in suites:
        failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        counts["failed"] += failed
        counts["skipped"] += int(suite.get("skipped", 0))
        counts["passed"] += int(suite.get("tests", 0)) - failed - int(suite.get("skipped", 0))
    ok = completed.returncode == 0 and counts["failed"] == 0 and counts["passed"] > 0
    return {
        "command": "pytest " + " ".join(paths),
        **counts,
        "seconds": seconds,
        "outcome": "passed" if ok else "failed",
    }


def versions(python: Path) -> dict:
    code = (
        "import json, platform, numpy, torch; print(json.dumps({'python': platform.python_version(),"
        " 'torch': torch.__version__, 'numpy': numpy.__version__}))"
    )
    return json.loads(subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout)


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def record(entry: Entry, python: Path) -> dict:
    runs = [pytest(python, ["tests"])]
    if entry.notebooks:
        runs.append(pytest(python, ["notebooks"]))
    return {
        "entry": entry.name,
        "why": entry.why,
        **versions(python),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, CPU only",
        "commit": git("rev-parse", "HEAD"),
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "runs": runs,
        "outcome": "passed" if all(r["outcome"] == "passed" for r in runs) else "failed",
    }


def save(records: list[dict]) -> None:
    """Replace the entries just run in results/matrix.json, keeping the others (a write never half-done)."""
    kept = json.loads(RESULTS.read_text(encoding="utf-8")) if RESULTS.exists() else []
    names = {r["entry"] for r in records}
    merged = [r for r in kept if r["entry"] not in names] + records
    merged.sort(key=lambda r: [int(p) for p in r["entry"].replace("-", ".").split(".")[:2]])
    tmp = RESULTS.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(merged, indent=2) + "\n", encoding="utf-8")
    tmp.replace(RESULTS)


def main(argv: list[str]) -> int:
    chosen = [e for e in ENTRIES if not argv or e.name in argv]
    unknown = set(argv) - {e.name for e in ENTRIES}
    if unknown:
        names = ", ".join(e.name for e in ENTRIES)
        print(f"no entry {', '.join(sorted(unknown))}: choose from {names}", file=sys.stderr)
        return 2
    records = []
    for entry in chosen:
        print(f"== Python {entry.python}, PyTorch {entry.torch}: {entry.why}", flush=True)
        records.append(record(entry, prepare(entry)))
        print(json.dumps(records[-1], indent=2), flush=True)
    save(records)
    for r in records:
        counts = "; ".join(f"{x['command']}: {x['passed']} passed, {x['failed']} failed" for x in r["runs"])
        print(f"{r['entry']}: {r['outcome']} ({counts})")
    return 0 if all(r["outcome"] == "passed" for r in records) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
