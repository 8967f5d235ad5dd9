"""Re-run lessons top to bottom and store what they printed, the way the book keeps its outputs.

    python tools/scripts/execute.py notebooks/09_training.ipynb [more notebooks ...]
    python tools/scripts/execute.py --only-tag solution notebooks/09_training.ipynb   # only self-contained cells
    ATEN_CPU_CAPABILITY=default OMP_NUM_THREADS=1 python tools/scripts/execute.py --time notebooks/*.ipynb

With ``--only-tag``, a fresh kernel runs the lesson's first two code cells (the install cell and
the set-up) and then only the cells with that tag, and only their outputs are stored: for cells
that need nothing else from the lesson (the exercises' solutions), so that adding one does not
cost a whole lesson's run. The test suite still runs every lesson top to bottom and compares.

Each notebook runs in ``notebooks/`` (as a reader's would) with a fresh kernel; then the stream
outputs of every cell are merged and progress bars reduced to their final state, exactly as
nbval does before it compares (so the stored output is what a reader's rerun is compared with).
Prints the wall time of each lesson.

With ``--time``, the lesson runs top to bottom as above but its outputs are left as they are:
only its wall time, what it ran on (the cores, and ``environment()``: CPU, threads, vector
instructions, PyTorch, commit) and a digest of its code cells are written into the notebook's
metadata, ``timed_run``. The README's and how-to-run's lesson tables quote that time for one core
without vector kernels, so ``--time`` runs only under the command above (the lesson's kernel
inherits those settings). tests/repository/test_lesson_times.py checks the tables against the
metadata, and the digest against the lesson's code: a lesson whose code changed is timed again.
The stored outputs come from a run at the machine's full speed: under the emulation a lesson's timings print other
numbers, which the prose around them does not describe.
"""

from __future__ import annotations

import copy
import hashlib
import os
import sys
import time
from pathlib import Path

import nbformat
import torch
from nbclient import NotebookClient
from nbval.plugin import coalesce_streams

from transformer_lib.files import atomic_path
from transformer_lib.utils import environment


def code_digest(notebook: nbformat.NotebookNode) -> str:
    """A SHA-256 of the lesson's code cells, in order: which code a timed run ran."""
    code = "\n\0\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
    return hashlib.sha256(code.encode("utf-8")).hexdigest()


def execute(path: Path, only_tag: str | None = None, time_only: bool = False) -> float:
    notebook = nbformat.read(path, as_version=4)
    run = notebook
    if only_tag:
        code = [cell for cell in notebook.cells if cell.cell_type == "code"]
        tagged = [cell for cell in code if only_tag in cell.metadata.get("tags", [])]
        run = nbformat.v4.new_notebook(metadata=notebook.metadata)
        # the tagged cells are the lesson's own objects (their outputs land in it); the install and
        # set-up cells are copies, so that they keep what the whole lesson printed
        run.cells = [copy.deepcopy(cell) for cell in code[:2]] + tagged
    env = environment(torch.device("cpu")) if time_only else {}  # before the run: its start
    start = time.perf_counter()
    NotebookClient(run, timeout=1800, resources={"metadata": {"path": str(path.parent)}}).execute()
    elapsed = time.perf_counter() - start
    if time_only:  # the file as it is now, outputs untouched: only the metadata changes
        notebook = nbformat.read(path, as_version=4)
        timed = {"seconds": round(elapsed, 1), "cpu_count": os.cpu_count(), "code_sha256": code_digest(run), **env}
        notebook.metadata["timed_run"] = timed
    else:
        for cell in notebook.cells:
            if cell.cell_type == "code":
                cell.outputs = coalesce_streams(cell.outputs)
                cell.metadata.pop("execution", None)  # timestamps: noise in every diff
    with atomic_path(path) as tmp:  # never a half-written notebook
        nbformat.write(notebook, tmp)
    return elapsed


def main() -> None:
    args = sys.argv[1:]
    only_tag, time_only = None, args[:1] == ["--time"]
    if time_only:
        args = args[1:]
        if (os.environ.get("ATEN_CPU_CAPABILITY"), os.environ.get("OMP_NUM_THREADS")) != ("default", "1"):
            sys.exit(
                "--time needs ATEN_CPU_CAPABILITY=default OMP_NUM_THREADS=1 set: "
                "the tables' times are for one core without vector kernels"
            )
    elif args[:1] == ["--only-tag"] and len(args) > 1:
        only_tag, args = args[1], args[2:]
    paths = [Path(p) for p in args]
    if not paths:
        sys.exit("usage: python tools/scripts/execute.py [--only-tag TAG | --time] notebooks/NN_name.ipynb [...]")
    for path in paths:
        if not path.is_file():
            sys.exit(f"no notebook at {path}")
        print(f"{path.name}: {execute(path, only_tag, time_only):.0f} s", flush=True)


if __name__ == "__main__":
    main()
