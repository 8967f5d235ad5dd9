"""Loaded by pytest for every way of running the tests, `pytest notebooks/...` included."""

import os

# Two test workers, each running lessons with two threads, share the CPU: OpenMP threads that
# spin while they wait would then steal each other's cores (the training lessons ran 6x slower).
# Set before PyTorch starts, here and in the notebooks' kernels, which inherit it.
# (transformer_lib sets the same default for readers who run a lesson by hand.)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
