"""The README's command 1 on a fresh virtual environment of a given Python, timed, as a record.

    python tools/scripts/command1.py 3.10 [--out results/commands/command1_python3.10.json]

Clones this repository's committed state into a temporary folder, makes a virtual environment
there with pyenv's Python of that version (``pythonX.Y`` on PATH where there is no pyenv) and runs
the README's command 1 in it, its two halves timed apart: ``pip install -r requirements.txt``
(pip's cache as the machine has it), then ``jupyter-book build . -W -n --keep-going``. Prints and
(with ``--out``) writes what it took: the seconds of each half, the environment's size and package
count, the Python, PyTorch's build, the commit and the machine. The README states the record;
nothing asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / ".ci"))
from repository import ROOT, clone_to, head_commit  # CI's: the repository's address and clones

sys.path.insert(0, str(ROOT))
from transformer_lib.files import write_text


def python_for(version: str) -> list[str]:
    """The command that runs Python ``version``, or one line saying it is missing."""
    if shutil.which("pyenv"):  # its shims stand on PATH even for Pythons it would refuse to run
        prefix = subprocess.run(["pyenv", "prefix", _pyenv_full(version)], capture_output=True, text=True, check=True)
        return [str(Path(prefix.stdout.strip()) / "bin" / "python")]
    named = shutil.which(f"python{version}")
    if named:
        return [named]
    raise SystemExit(f"no Python {version} here: install it (pyenv install {version}) and run this again")


def _pyenv_full(version: str) -> str:
    """pyenv's full version for ``version`` (3.10 → 3.10.13), the newest installed."""
    out = subprocess.run(["pyenv", "versions", "--bare"], capture_output=True, text=True, check=True).stdout.split()
    found = sorted((v for v in out if v.startswith(f"{version}.")), key=lambda v: int(v.split(".")[2]))
    if not found:
        raise SystemExit(f"no Python {version} in pyenv: pyenv install {version}")
    return found[-1]


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.monotonic()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"failed: {' '.join(command)}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return time.monotonic() - start


def versions(python: str, clone: Path, cwd: Path, env: dict[str, str]) -> tuple[str, str]:
    """The Python and PyTorch versions that ``python`` runs in ``cwd``; one line, and a stop, unless the
    transformer_lib it imports there is the clone's."""
    code = "import sys, torch, transformer_lib as t; print(sys.version.split()[0], torch.__version__, t.__file__)"
    done = subprocess.run([python, "-c", code], cwd=cwd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{python} cannot import the book's packages:\n{done.stderr[-2000:]}")
    python_version, torch_version, package = done.stdout.split()
    if not Path(package).is_relative_to(clone):
        raise SystemExit(f"the environment imports transformer_lib from {package}, not from the clone {clone}")
    return python_version, torch_version


def machine() -> str:
    """This machine in a record's words: architecture, cores, platform."""
    return f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}"


def print_record(record: dict, out: Path | None) -> None:
    """``record`` as JSON on stdout, and written to ``out`` too when one is given."""
    text = json.dumps(record, indent=2) + "\n"
    print(text, end="")
    if out:
        write_text(out, text)


def size_mb(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file() and not f.is_symlink()) / 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("version", help="the Python to use, e.g. 3.10")
    parser.add_argument("--out", type=Path, help="write the record (JSON) here too")
    args = parser.parse_args()
    python = python_for(args.version)
    commit = head_commit()
    with tempfile.TemporaryDirectory() as scratch:
        clone = Path(scratch) / "book"
        clone_to(clone)
        subprocess.run([*python, "-m", "venv", str(clone / ".venv")], check=True)
        venv = clone / ".venv" / "bin"
        env = {**os.environ, "PATH": f"{venv}{os.pathsep}{os.environ['PATH']}", "VIRTUAL_ENV": str(venv.parent)}
        env.pop("PYENV_VERSION", None)
        subprocess.run([str(venv / "python"), "-m", "pip", "install", "-q", "--upgrade", "pip"], env=env, check=True)
        started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        install = timed([str(venv / "python"), "-m", "pip", "install", "-q", "-r", "requirements.txt"], clone, env)
        python_version, torch_version = versions(str(venv / "python"), clone, Path(scratch), env)
        if not python_version.startswith(f"{args.version}."):
            raise SystemExit(f"the environment runs Python {python_version}, not {args.version}")
        build = timed([str(venv / "jupyter-book"), "build", ".", "-W", "-n", "--keep-going"], clone, env)
        packages = subprocess.run(
            [str(venv / "python"), "-m", "pip", "list", "--format=json"], capture_output=True, text=True, env=env
        )
        record = {
            "command": "pip install -r requirements.txt && jupyter-book build . -W -n --keep-going",
            "python": python_version,
            "torch": torch_version,
            "install_seconds": round(install),
            "build_seconds": round(build),
            "environment_mb": round(size_mb(venv.parent)),
            "packages": len(json.loads(packages.stdout)),
            "git_commit": commit,
            "started_utc": started,
            "machine": machine(),
        }
    print_record(record, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
