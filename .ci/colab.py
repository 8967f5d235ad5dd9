"""Every lesson as a reader on Colab meets it: alone in an empty folder, in a bare environment.

    python .ci/colab.py                          # every lesson (and every built assignment's solution), two at a time
    python .ci/colab.py notebooks/04_attention.ipynb [...]
    python .ci/colab.py --base                   # only the base environment, for the next run to use

A reader who opens a lesson on Colab has none of this repository: no ``../results``, no
``../book``, no ``transformer_lib``. Colab preinstalls PyTorch and the scientific stack, and the
lesson's first cell installs the package from the repository's address. This script builds that
situation and runs each lesson top to bottom with nbclient:

* a fresh environment (``.colab/base``) with only what Colab preinstalls that matters here
  (``PREINSTALLED``): not transformer_lib, sentencepiece, sacrebleu, sacremoses or onnx (``--base``
  makes it ahead of a run, as ``.ci/run`` does beside its first stages);
* for each lesson, an empty folder holding only a copy of the notebook and an environment of its
  own layered on the base one (a ``.pth`` file), so that every lesson's first cell really
  installs the package, as it does on a new Colab machine;
* the repository's address (``_config.yml``) in the copy replaced by this checkout's, as
  ``git+file://`` for pip and ``file://`` for git: the lessons install the committed state of this
  checkout (at its commit, so that pip builds the wheel once and then takes it from its cache), and
  lesson 11 clones it for its records;
* cells tagged ``nbval-skip`` or ``skip-execution`` (lesson 11's GPU training) are not run.

The assignments a student opens on Colab are checked the same way: where ``.ci/assignments.py``
has built them (``_build/assignments``), each solution runs alone too, its first cell installing
the package and Otter-Grader, and every ``grader.check`` must pass. A solution's checks run the
hidden tests too, which import the book's tools (``tools/``, as the autograder has them): its
environment finds them through its ``.pth`` file.

The lessons run under nbval, each in its own kernel (the notebook's kernelspec names it), so that
every stored output is compared too: run with ``ATEN_CPU_CAPABILITY=default OMP_NUM_THREADS=1``
(as ``.ci/run`` does), this one execution is both the reader on Colab and the reader on another
CPU. The assignments' solutions run with nbclient: a solution fails on any error in a cell not
tagged ``raises-exception``, or an Otter check that failed, and the script says which one and
cell. Notebooks that did not fail leave nothing behind; a failed solution keeps its folder under
``.colab/`` for a look (the notebook with its outputs, and ``kernel.log``: what the kernel and pip
printed outside the cells).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import nbformat
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from repository import ROOT, configured, head_commit

from book_tools.coursework.grading import RELEASE_LINE  # an assignment's ref: RELEASE = "main"

WORK = ROOT / ".colab"
# What Colab preinstalls that the lessons use; PyTorch is the small CPU build of the book's version
# (Colab's is a CUDA build of a recent release: .ci/matrix.py tests the newest).
PREINSTALLED = ["torch==2.13.0", "numpy", "matplotlib", "seaborn", "scikit-learn", "ipykernel", "tqdm", "pyyaml"]
SKIPPED_TAGS = {"nbval-skip", "skip-execution"}


BASE = WORK / "base"
BASE_READY = BASE / "ready.txt"  # written last, naming what the base holds: a base without it is half made


def make_base() -> Path:
    """A fresh environment holding PREINSTALLED; returns its site-packages folder."""
    shutil.rmtree(WORK, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(BASE)], check=True)
    pip = [str(BASE / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    subprocess.run([*pip, *PREINSTALLED], check=True)
    BASE_READY.write_text("\n".join(PREINSTALLED) + "\n", encoding="utf-8")
    return site_packages(BASE)


def ready_base() -> Path:
    """The base environment that ``--base`` made (.ci/run makes it beside the tests), or a new one."""
    if BASE_READY.is_file() and BASE_READY.read_text(encoding="utf-8").split() == PREINSTALLED:
        for folder in WORK.iterdir():  # what an earlier run left, but the base
            if folder != BASE:
                shutil.rmtree(folder)
        return site_packages(BASE)
    return make_base()


def site_packages(venv: Path) -> Path:
    python = venv / "bin" / "python"
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return Path(subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.strip())


def lesson_copy(notebook: Path, folder: Path, kernel: str = "colab") -> Path:
    """The notebook alone in ``folder``, its repository address replaced by this checkout's, run by ``kernel``."""
    repo, _ = configured()
    nb = nbformat.read(notebook, as_version=4)
    install = f"git+https://github.com/{repo}"
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    if not code or install not in code[0].source:
        raise SystemExit(f"{notebook.name}: its first code cell does not install the package from {install}")
    # The package at this checkout's commit: a commit is a ref that cannot move, so pip builds its
    # wheel once and takes it from its cache for every other notebook. An assignment's cell names
    # its ref apart (RELEASE, as a course pins a release), a lesson's after the address.
    commit = head_commit()
    first = code[0]
    if RELEASE_LINE in first.source:
        first.source = first.source.replace(RELEASE_LINE, f'RELEASE = "{commit}"')
    else:
        first.source = first.source.replace(f'"{install}"', f'"{install}@{commit}"')
    for cell in code:
        cell.source = cell.source.replace(install, f"git+file://{ROOT}")
        cell.source = cell.source.replace(f"https://github.com/{repo}", f"file://{ROOT}")
        if SKIPPED_TAGS & set(cell.metadata.get("tags", [])):
            cell.metadata.setdefault("tags", []).append("skip-execution")
    nb.metadata["kernelspec"] = {"name": kernel, "display_name": "Colab-like", "language": "python"}
    copy = folder / notebook.name
    nbformat.write(nb, copy)
    return copy


def lesson_environment(folder: Path, base: Path, kernel: str = "colab") -> Path:
    """An environment of the lesson's own over the base one, with a Jupyter kernel; returns its kernels folder.

    The kernel's ``PATH`` starts with that environment, so that a lesson's shell commands (``!python``)
    run in it too, not in the environment that started the kernel."""
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (site_packages(venv) / "_colab_base.pth").write_text(
        f"{base}\n", encoding="utf-8"
    )  # pip comes from the base, as torch does
    spec = folder / "kernels" / kernel
    spec.mkdir(parents=True)
    argv = [str(venv / "bin" / "python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    env = {"PATH": kernel_env(venv)["PATH"]}
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "Colab-like", "language": "python", "env": env}), encoding="utf-8"
    )
    return spec.parent


def kernel_env(venv: Path) -> dict[str, str]:
    """This process's environment without the CI's virtual environment, one thread per lesson."""
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"}}
    ours = str(Path(sysconfig.get_paths()["scripts"]))
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p != ours]
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *path])
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


def run_lesson(notebook: Path, base: Path) -> tuple[str, float, str | None]:
    """Run one lesson alone; (name, seconds, None) or (name, seconds, what failed in one line)."""
    folder = WORK / notebook.stem
    folder.mkdir(parents=True)
    copy = lesson_copy(notebook, folder)
    kernels = lesson_environment(folder, base)
    # A solution holds the hidden tests too, which import the book's tools, as the autograder that
    # installs them does; the public tests a student runs import only the package (a test says so).
    with open(site_packages(folder / "venv") / "_colab_base.pth", "a", encoding="utf-8") as pth:
        pth.write(f"{ROOT / 'tools'}\n")
    nb = nbformat.read(copy, as_version=4)
    km = KernelManager(kernel_name="colab", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels)]))
    current = {"index": None}

    def on_cell_start(cell, cell_index):
        current["index"] = cell_index

    client = NotebookClient(
        nb, km=km, timeout=1800, resources={"metadata": {"path": str(folder)}}, on_cell_start=on_cell_start
    )
    start = time.perf_counter()
    try:
        # what the kernel and its pip print outside the cells
        with open(folder / "kernel.log", "w", encoding="utf-8") as log:
            client.execute(env=kernel_env(folder / "venv"), stdout=log, stderr=log)
    except Exception as error:  # a cell's error, a timeout, a dead kernel: say where, in one line
        index = current["index"]
        text = re.sub(r"\x1b\[[0-9;]*m", "", str(error)).strip()  # IPython colours its tracebacks
        last = text.splitlines()[-1] if text else type(error).__name__
        where = f"cell {index} (counting from 0)" if index is not None else "before the first cell"
        nbformat.write(nb, copy)  # its outputs, for a look
        return notebook.name, time.perf_counter() - start, f"{where}: {last}"
    failed_checks = [  # an assignment's public tests, run by grader.check
        i for i, cell in enumerate(nb.cells) if cell.cell_type == "code" and "Test case failed" in str(cell.outputs)
    ]
    if failed_checks:
        nbformat.write(nb, copy)
        return notebook.name, time.perf_counter() - start, f"cell {failed_checks[0]} (counting from 0): a check failed"
    shutil.rmtree(folder)
    return notebook.name, time.perf_counter() - start, None


def compare_lessons(lessons: list[Path], base: Path) -> int:
    """Every lesson alone in its own folder and environment, its outputs compared by nbval; pytest's exit code.

    One kernel a lesson (``colab-<lesson>``, found through ``JUPYTER_PATH``), two lessons at a time,
    ordered by the repository's conftest.py (the longest first). The variables of the emulated CPU,
    if set, reach the kernels through this process's environment.
    """
    copies, kernel_dirs = [], []
    for notebook in lessons:
        folder = WORK / notebook.stem
        folder.mkdir(parents=True)
        kernel = f"colab-{notebook.stem.lower()}"
        copies.append(lesson_copy(notebook, folder, kernel))
        kernel_dirs.append(str(lesson_environment(folder, base, kernel).parent))
    env = kernel_env(WORK / "none")
    env["JUPYTER_PATH"] = os.pathsep.join(kernel_dirs)
    sanitize = ROOT / "tests" / "nbval_sanitize.cfg"
    pytest = [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadfile", "-p", "no:cacheprovider"]
    pytest += ["-o", "addopts=", "--rootdir", str(ROOT), "--nbval", "--nbval-sanitize-with", str(sanitize)]
    pytest += ["--durations", "10"]  # the slowest cells: where CI's time goes
    return subprocess.run([*pytest, *map(str, copies)], cwd=ROOT, env=env).returncode


def assignment_solutions() -> list[Path]:
    """The solutions .ci/assignments.py built, but the capstone's: it trains for 20 minutes (skip-execution)."""
    solutions = sorted((ROOT / "_build" / "assignments").glob("*/autograder/*.ipynb"))
    return [
        path
        for path in solutions
        if not any("skip-execution" in c.metadata.get("tags", []) for c in nbformat.read(path, as_version=4).cells)
    ]


def main(argv: list[str]) -> int:
    if argv == ["--base"]:  # the base environment alone, for a run to come
        make_base()
        return 0
    given = [Path(a).resolve() for a in argv]
    everything = sorted((ROOT / "notebooks").glob("*.ipynb"))
    lessons = [n for n in given if n.parent == ROOT / "notebooks"] if given else everything
    notebooks = [n for n in given if n not in lessons] if given else assignment_solutions()
    missing = [str(n) for n in [*lessons, *notebooks] if not n.is_file()]
    if missing:
        print(f"no notebook at {', '.join(missing)}", file=sys.stderr)
        return 2
    dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout
    if dirty.strip():
        print("note: the lessons install the committed state of this checkout; uncommitted changes are not in it")
    start = time.perf_counter()
    base = ready_base()
    print(f"the Colab-like base environment in {time.perf_counter() - start:.0f} s: {', '.join(PREINSTALLED)}")
    failed = []
    if lessons:
        if compare_lessons(lessons, base) != 0:
            print(f"a lesson alone failed or printed other outputs (see above; folders in {WORK.relative_to(ROOT)}/)")
            return 1
        print(f"{len(lessons)} lessons ran alone, their outputs compared, in {time.perf_counter() - start:.0f} s")
    with ProcessPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(run_lesson, notebook, base) for notebook in notebooks]
        for future in as_completed(futures):
            try:
                name, seconds, problem = future.result()
            except Exception:  # the script's own failure, not a lesson's
                traceback.print_exc()
                return 1
            print(f"{'FAILED' if problem else 'ok':6} {name} ({seconds:.0f} s){': ' + problem if problem else ''}")
            if problem:
                failed.append(name)
    seconds = time.perf_counter() - start
    if notebooks:
        print(f"{len(notebooks) - len(failed)} of {len(notebooks)} notebooks ran alone in {seconds:.0f} s")
    if failed:
        print(f"failed: {', '.join(failed)} (their folders are under {WORK.relative_to(ROOT)}/)")
        return 1
    shutil.rmtree(WORK)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
