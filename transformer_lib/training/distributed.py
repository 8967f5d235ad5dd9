"""Data-parallel training on several processes, as ``torchrun`` starts them (one per GPU or CPU).

``torchrun --standalone --nproc_per_node=N -m transformer_lib train --config ...`` sets
``RANK``, ``LOCAL_RANK`` and ``WORLD_SIZE`` for each process; :func:`init` joins them into one
process group (NCCL on GPUs, gloo on CPUs). Every process holds a full copy of the model, trains
on its share of each step's batches, and the gradients are averaged before every update
(``DistributedDataParallel``), so all copies stay identical. A single process needs none of this:
every helper here is then a no-op. Stopping is shared too: a Ctrl-C or SIGTERM sets a flag
(:func:`stop_requests`) that every process reads before it stops, together.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from transformer_lib.config import TrainConfig


def is_distributed() -> bool:
    """True inside a process group of more than one process."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def rank() -> int:
    """This process's number, 0 for the main process (the one that writes files)."""
    return dist.get_rank() if is_distributed() else 0


def world_size() -> int:
    """How many processes share each step (1 outside a process group)."""
    return dist.get_world_size() if is_distributed() else 1


def init(device: torch.device) -> torch.device:
    """Join the process group torchrun describes (if any) and return this process's device.

    On CUDA each process takes the GPU of its ``LOCAL_RANK``; on a CPU all share the CPU.
    """
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1 or dist.is_initialized():
        return device
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return device


def finish() -> None:
    """Leave the process group (at the end of a run), all processes together.

    The barrier keeps a process that finishes first from shutting its connections while another
    still uses them: without it, a CPU run (gloo) now and then aborted at exit
    ("terminate called without an active exception").
    """
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def sum_across(values: list[float], device: torch.device) -> list[float]:
    """Element-wise sums over all processes (the values themselves in a single process)."""
    if not is_distributed():
        return values
    return sum_tensor(torch.tensor(values, dtype=torch.float64, device=device)).tolist()


def sum_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """Element-wise sums over all processes, left on the device (no wait for the host)."""
    if is_distributed():
        dist.all_reduce(tensor)
    return tensor


def gather(obj: object) -> list[object]:
    """Every process's ``obj``, in rank order (``[obj]`` in a single process)."""
    if not is_distributed():
        return [obj]
    out: list[object] = [None] * world_size()
    dist.all_gather_object(out, obj)
    return out


def broadcast(obj: object) -> object:
    """The main process's ``obj``, in every process."""
    if not is_distributed():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier() -> None:
    """Wait until every process has reached this point."""
    if is_distributed():
        dist.barrier()


def wrap(model: nn.Module, device: torch.device, config: TrainConfig, world: int) -> nn.Module:
    """The form a model's training steps run through.

    With several processes, ``DistributedDataParallel``, which averages the gradients in
    ``backward()``; on a GPU, compiled by ``torch.compile`` when the config asks for it, with
    ``cuda_graphs`` in ``reduce-overhead`` mode (CUDA graphs). Otherwise the model itself.
    """
    on_gpu = device.type == "cuda"
    if world > 1:
        model = DistributedDataParallel(model, device_ids=[device] if on_gpu else None)
    if not on_gpu or not (config.compile or config.cuda_graphs):
        return model
    return torch.compile(model, dynamic=True, mode="reduce-overhead" if config.cuda_graphs else None)


def begin_step(model: nn.Module, device: torch.device, cuda_graphs: bool) -> None:
    """Training mode (the first step, and the first after a validation); with CUDA graphs, a new
    iteration, after which the last step's graph outputs may be overwritten."""
    if not model.training:
        model.train()
    if cuda_graphs and device.type == "cuda":
        torch.compiler.cudagraph_mark_step_begin()


def no_sync(model: nn.Module, skip: bool):
    """Within it, backward() leaves gradients unaveraged across processes (accumulation)."""
    model = getattr(model, "_orig_mod", model)  # the module torch.compile wrapped
    if skip and isinstance(model, DistributedDataParallel):
        return model.no_sync()
    return contextlib.nullcontext()


@contextlib.contextmanager
def stop_requests():
    """A flag that SIGINT and SIGTERM set (a second Ctrl-C stops at once); handlers restored after."""
    stop = [False]
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield stop
        return

    def request(signum, frame):
        if stop[0] and signum == signal.SIGINT:
            raise KeyboardInterrupt
        stop[0] = True

    previous = {sig: signal.signal(sig, request) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
