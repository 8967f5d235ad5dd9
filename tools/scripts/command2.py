"""The README's command 2 on a clean clone, timed, as a record: the total, and where the time went.

    python tools/scripts/command2.py [--out results/commands/command2.json]

Run it from the environment command 1 made (it needs pytest, nbval, Chromium's driver and the
book's toolchain). Clones this repository's committed state into a temporary folder, builds the
site there (command 1's second half, not timed: the browser tests read it), then runs command 2,
``pytest -n 2 --dist loadfile``, with ``--durations=0`` added so that pytest reports each test's
time. The clone's own packages (the library and the tools) are the ones imported, by the tests and
the lessons' kernels alike.
Prints and (with ``--out``) writes: the wall-clock seconds, the tests passed and skipped, the
seconds each file took (lessons and test files), the share of the machine's CPU time spent
working while it ran (Linux), whether torch.compile's disk cache already held kernels, the Python,
PyTorch, the commit and the machine. The README states the record; nothing asserts a time.

torch.compile's disk cache is a new, empty folder, as on a new machine: lesson 12 compiles, and the
kernels a cache already holds would save it tens of seconds of C++ builds. Set
``TORCHINDUCTOR_CACHE_DIR`` to time the run with a cache of your choice (the machine's own is
``/tmp/torchinductor_$USER``).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[2] / ".ci"))
from command1 import machine, print_record, timed, versions
from repository import clone_to, head_commit  # CI's: the repository's address and clones

COMMAND = ["pytest", "-n", "2", "--dist", "loadfile"]
DURATION = re.compile(r"^([\d.]+)s (?:setup|call|teardown)\s+(\S+?)(?:::\S.*)?$")  # "12.34s call     path::test"
SUMMARY = re.compile(r"^\s*=*\s*(\d+ \w+.*?) in ([\d.]+)s", re.MULTILINE)  # "== 1278 passed, 5 skipped in 791.85s =="


def cpu_ticks() -> tuple[int, int] | None:
    """(busy, total) clock ticks of all CPUs since boot, from /proc/stat; None where there is none."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text(encoding="ascii").split("\n", 1)[0].split()[1:]]
    except OSError:
        return None
    idle = fields[3] + fields[4]  # idle, iowait
    return sum(fields) - idle, sum(fields)


def compile_cache_warm(folder: Path) -> bool:
    """Whether torch.compile's disk cache, the folder ``TORCHINDUCTOR_CACHE_DIR`` names, holds anything yet."""
    return folder.is_dir() and any(folder.iterdir())


def per_file(output: str) -> dict[str, float]:
    """Seconds per file (a lesson or a test file) from pytest's ``--durations=0`` lines, slowest first."""
    seconds: dict[str, float] = defaultdict(float)
    for line in output.splitlines():
        match = DURATION.match(line.strip())
        if match:
            seconds[match.group(2)] += float(match.group(1))
    return {name: round(s, 1) for name, s in sorted(seconds.items(), key=lambda item: -item[1])}


def counts(output: str) -> dict[str, int]:
    """pytest's closing line as numbers: {"passed": 1278, "skipped": 5, ...}."""
    summary = SUMMARY.findall(output)
    if not summary:
        raise SystemExit(f"pytest printed no summary line:\n{output[-3000:]}")
    return {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", summary[-1][0])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the record (JSON) here too")
    args = parser.parse_args()
    commit = head_commit()
    bin_dir = Path(sys.executable).parent
    with tempfile.TemporaryDirectory() as scratch:
        clone = Path(scratch) / "book"
        clone_to(clone)
        # The clone's packages first on the path (the library, and the tools in tools/): editable installs
        # would otherwise import this checkout's.
        path = os.pathsep.join([str(clone), str(clone / "tools")])
        env = {**os.environ, "PYTHONPATH": path, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
        env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(Path(scratch) / "torchinductor"))  # empty: a new machine's
        python_version, torch_version = versions(sys.executable, clone, clone / "notebooks", env)  # as a lesson
        timed([str(bin_dir / "jupyter-book"), "build", ".", "-W", "-n", "--keep-going"], clone, env)  # not timed
        started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        warm = compile_cache_warm(Path(env["TORCHINDUCTOR_CACHE_DIR"]))
        ticks, start = cpu_ticks(), time.monotonic()
        done = subprocess.run([*COMMAND, "--durations=0"], cwd=clone, capture_output=True, text=True, env=env)
        seconds = time.monotonic() - start
        ticks_after = cpu_ticks()
        if done.returncode != 0:
            raise SystemExit(f"command 2 failed:\n{done.stdout[-5000:]}")
    record = {
        "command": " ".join(COMMAND),
        "seconds": round(seconds),
        "tests": counts(done.stdout),
        "cpu_busy_share": None
        if ticks is None or ticks_after is None
        else round((ticks_after[0] - ticks[0]) / (ticks_after[1] - ticks[1]), 3),
        "compile_cache_warm": warm,
        "python": python_version,
        "torch": torch_version,
        "git_commit": commit,
        "started_utc": started,
        "machine": machine(),
        "seconds_per_file": per_file(done.stdout),
    }
    print_record(record, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
