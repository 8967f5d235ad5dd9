"""Loaded by pytest for every way of running the tests, `pytest notebooks/...` included."""

import functools
import os
from collections import Counter

import nbval.kernel

# Two test workers, each running lessons with two threads, share the CPU: OpenMP threads that
# spin while they wait would then steal each other's cores (the training lessons ran 6x slower).
# Set before PyTorch starts, here and in the notebooks' kernels, which inherit it.
# (transformer_lib sets the same default for readers who run a lesson by hand.)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# Even passive threads contend: with `pytest -n 2` on 2 cores, 2 workers x 2 threads is twice
# the cores. Each xdist worker, and the lessons it runs (`setup` reads the variable), takes its
# share of the cores instead, unless the reader chose a number.
_workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _workers > 1:
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // _workers)))


# The lessons' stored outputs were computed on a CPU: on a Mac, `setup()` would otherwise pick Apple's
# GPU (MPS), whose numbers differ. The notebooks' kernels inherit this; a reader's own run does not.
os.environ.setdefault("TRANSFORMER_LIB_DEVICE", "cpu")


def _retrying(start_kernel, tries: int = 3):
    """`start_kernel`, tried again (up to `tries` times) when the kernel dies before it replies.

    Two xdist workers that start their kernels at the same moment can both be handed the same free
    TCP port; the kernel that loses exits at once, and nbval then errors every cell of that lesson
    at setup ("Kernel died before replying to kernel_info"; seen once in CI, on a lesson that passes
    alone). A second start picks new ports. A kernel that keeps dying still fails, on the last try.
    """

    @functools.wraps(start_kernel)
    def start(*args, **kwargs):
        for attempt in range(1, tries + 1):
            try:
                return start_kernel(*args, **kwargs)
            except RuntimeError:
                if attempt == tries:
                    raise

    return start


nbval.kernel.start_new_kernel = _retrying(nbval.kernel.start_new_kernel)


def pytest_collection_modifyitems(items: list) -> None:
    """Order the files for `--dist loadfile` (pyproject's addopts keep this order): the lessons first,
    the last lesson first (the later lessons train longest), then the test files marked `slow`, then
    the others, each group the files with the most tests first.

    Two workers each take the next file when they finish one; a long lesson taken last would run
    alone at the end while the other worker sat idle. Within a file the order stays as written.
    """
    files = Counter(item.path for item in items)

    def rank(item) -> tuple[int, int]:
        if item.path.suffix == ".ipynb":  # a lesson is named NN_title.ipynb; an appendix runs beside lesson 11
            number = item.path.name[:2]
            return (0, -int(number) if number.isdigit() else -11)
        return (1 if item.get_closest_marker("slow") else 2, -files[item.path])

    items.sort(key=rank)  # stable: the cells of a lesson keep their order
