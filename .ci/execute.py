"""Re-run lessons top to bottom and store what they printed, the way the book keeps its outputs.

    python .ci/execute.py notebooks/09_training.ipynb [more notebooks ...]

Each notebook runs in ``notebooks/`` (as a reader's would) with a fresh kernel; then the stream
outputs of every cell are merged and progress bars reduced to their final state, exactly as
nbval does before it compares (so the stored output is what a reader's rerun is compared with).
Prints the wall time of each lesson, the number the README's lesson table quotes.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbval.plugin import coalesce_streams


def execute(path: Path) -> float:
    notebook = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(notebook, timeout=1800, resources={"metadata": {"path": str(path.parent)}}).execute()
    elapsed = time.perf_counter() - start
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs = coalesce_streams(cell.outputs)
            cell.metadata.pop("execution", None)  # timestamps: noise in every diff
    tmp = path.with_suffix(".ipynb.tmp")
    nbformat.write(notebook, tmp)
    tmp.replace(path)  # never a half-written notebook
    return elapsed


def main() -> None:
    paths = [Path(p) for p in sys.argv[1:]]
    if not paths:
        sys.exit("usage: python .ci/execute.py notebooks/NN_name.ipynb [...]")
    for path in paths:
        if not path.is_file():
            sys.exit(f"no notebook at {path}")
        print(f"{path.name}: {execute(path):.0f} s", flush=True)


if __name__ == "__main__":
    main()
