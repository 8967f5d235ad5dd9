"""The narrow channel between the grader and a submission's process: frames of data, nothing else.

Two pipes join them. The grader sends requests (run these cells, call this function with these
arguments) pickled: the submission's process is the one that unpickles them, and the grader's data
can do it no harm. The submission's process answers with data only: ``None``, numbers, strings,
bytes, tensors, and lists, tuples and dicts of them, written with ``torch.save`` and read back
with ``torch.load(weights_only=True)``, which builds nothing else. Anything else the submission
returns (a module, a bound method, a generator) stays in its process and comes back as a
*handle*, a small dict the grader turns into a :class:`book_tools.coursework.sandbox.Remote`; the
grader's own functions given as arguments (a model given as a function, say) go the other way as handles too, and the
submission's process calls back for them.

Each frame is an 8-byte length and the bytes; a frame longer than ``MAX_FRAME`` is refused
unread, so that a huge answer costs the question that asked for it, not the grader's memory.
"""

from __future__ import annotations

import io
import os
import pickle
import select
import struct
import sys
import time
import types
from functools import partial
from typing import Any, BinaryIO

from transformer_lib.coursework.checks import RemoteAnswer

MAX_FRAME = 256 * 2**20  # bytes: far above any answer's tensors, far below a grading machine's memory
HANDLE = "\x00handle"  # the key of a handle's dict: {HANDLE: id, "type": name, "callable": bool}
_HEADER = struct.Struct("<Q")


class Closed(Exception):
    """The other end went away, sent what cannot be read, or did not answer in time."""


class Stopped(Exception):
    """The submission's process was stopped, or broke the channel: the request failed, and says why."""


class RemoteError(Exception):
    """The submission's code raised: ``kind`` is its exception's name, the message its first line."""

    def __init__(self, kind: str, message: str):
        super().__init__(f"{kind}: {message}" if message else kind)
        self.kind, self.message = kind, message


def write_frame(fd: int, payload: bytes) -> None:
    data = _HEADER.pack(len(payload)) + payload
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except (BrokenPipeError, OSError) as error:
            raise Closed(f"the channel is closed ({error.strerror or error})") from None
        view = view[written:]


def _read_exactly(fd: int, n: int, deadline: float | None) -> bytes:
    chunks, left = [], n
    while left:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                raise TimeoutError
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise Closed("the submission's process ended")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, deadline: float | None = None) -> bytes:
    """One frame's bytes; TimeoutError past ``deadline`` (time.monotonic()), Closed at the end or when too long."""
    (size,) = _HEADER.unpack(_read_exactly(fd, _HEADER.size, deadline))
    if size > MAX_FRAME:
        raise Closed(f"it returned more than {MAX_FRAME // 2**20} MB")
    return _read_exactly(fd, size, deadline)


# The grader's side: requests pickled, answers read as data only.


def is_callback(value: Any) -> bool:
    """Whether the grader passes ``value`` as a function to call back, not by name: a test's own functions
    (a model given as a function, a correct answer standing in), which the submission's process cannot import."""
    if isinstance(value, (types.MethodType, partial)):
        return True
    if not isinstance(value, types.FunctionType):
        return False
    found: Any = sys.modules.get(value.__module__)
    for part in value.__qualname__.split("."):
        found = getattr(found, part, None)
    return found is not value


class Handle(RemoteAnswer):
    """What stands, in the grader, for an object of the submission's process.

    The grader's handles are :class:`book_tools.coursework.sandbox.Remote`; the checks know them as
    :class:`transformer_lib.coursework.checks.RemoteAnswer`, which :func:`~transformer_lib.coursework.checks.call`
    asks to make the call there.
    """

    __slots__ = ()
    _remote_id: int


class _RequestPickler(pickle.Pickler):
    def __init__(self, file: BinaryIO, callbacks: dict[int, Any]):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.callbacks = callbacks

    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, Handle):
            return ("handle", obj._remote_id)
        if is_callback(obj):
            self.callbacks[id(obj)] = obj
            return ("callback", id(obj))
        return None


def request(message: Any, callbacks: dict[int, Any]) -> bytes:
    """A request's bytes: handles (sandbox.Remote) by id, the grader's functions as callbacks."""
    buffer = io.BytesIO()
    _RequestPickler(buffer, callbacks).dump(message)
    return buffer.getvalue()


def read_answer(payload: bytes) -> Any:
    """An answer's data, built by ``torch.load(weights_only=True)``: nothing but data can come out."""
    import torch

    try:
        return torch.load(io.BytesIO(payload), weights_only=True, map_location="cpu")
    except Exception as error:
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise Closed(f"it sent what the grader cannot read as data ({first[:120]})") from None


# The submission's side: requests unpickled (they come from the grader), answers written as data.


class RequestUnpickler(pickle.Unpickler):
    """A request unpickled in the submission's process: its handles become the objects they stand for,
    its callbacks functions that ask the grader to run them."""

    def __init__(self, file: BinaryIO, objects: dict[int, Any], callback: Any):
        super().__init__(file)
        self.objects, self.callback = objects, callback

    def persistent_load(self, pid: Any) -> Any:
        kind, number = pid
        if kind == "handle":
            if number not in self.objects:
                raise KeyError(f"no object {number}: it belongs to a process that was stopped")
            return self.objects[number]
        return self.callback(number)


def as_data(value: Any, objects: dict[int, Any], depth: int = 0) -> Any:
    """``value`` as data the grader can read; what is not data becomes a handle, kept in ``objects``."""
    import torch

    kind = type(value)
    if value is None or kind in (bool, int, float, complex, str, bytes):
        return value
    if isinstance(value, torch.Tensor):
        try:
            return value.detach().as_subclass(torch.Tensor).clone()
        except Exception:
            pass
    elif isinstance(value, (bool, int, float, complex, str, bytes)):  # numpy's float64, an IntEnum
        base = next(b for b in (bool, int, float, complex, str, bytes) if isinstance(value, b))
        try:
            return base(value)
        except Exception:
            pass
    elif depth < 20 and isinstance(value, (list, tuple)):  # torch.Size and named tuples: tuples
        items = [as_data(item, objects, depth + 1) for item in value]
        return items if isinstance(value, list) else tuple(items)
    elif depth < 20 and isinstance(value, dict) and all(type(key) in (str, int) for key in value):
        return {key: as_data(item, objects, depth + 1) for key, item in value.items()}
    elif kind.__module__ == "numpy" and getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        return as_data(value.item(), objects, depth + 1)
    objects[id(value)] = value
    return {HANDLE: id(value), "type": kind.__name__[:60], "callable": callable(value)}


def answer(message: dict) -> bytes:
    """An answer's bytes, written as the grader reads them (:func:`read_answer`)."""
    import torch

    buffer = io.BytesIO()
    torch.save(message, buffer)
    return buffer.getvalue()
