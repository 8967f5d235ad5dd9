"""What every check is made of: the lessons' exercises and the assignments' tests alike.

The exercises are :mod:`transformer_lib.coursework.exercises`'s; the assignments' tests are Otter's.
A check compares a learner's answer with an independent reference and, when they differ, raises
:class:`Wrong` with one line that says what is wrong. The helpers here make that line the same
everywhere: an answer that is not defined (its cell failed), a call that raised or ran too long,
a tensor of the wrong shape, two tensors that differ and by how much.

What only grading needs (random cases, the package's own components made unavailable, the calls
into a submission's separate process, the capstone's BLEU) is the book's tools':
``book_tools.coursework.checks``, which the hidden tests import where they are graded.
"""

from __future__ import annotations

import math
import re
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

CALL_SECONDS = 10  # the longest one call into a learner's code may run before it counts as endless
_ENDLESS: set = set()  # the code of calls stopped once: not waited for again (tests run more than once)


class Wrong(AssertionError):
    """The answer is wrong, and the message says how (an AssertionError, as graders expect)."""


# (source, "ErrorType: message") of each cell that failed while a submission was graded: the grading
# kernel's first cell records them (grading.CellTimeLimit), so that a missing answer says why.
FAILED_CELLS: list[tuple[str, str]] = []


def defined(answer: Any, name: str) -> Any:
    """The answer itself, or Wrong when its cell never defined it (Otter passes None for a missing name).

    When the cell that should define it failed while being graded, the line says with what error,
    naming a failed import as one.
    """
    if answer is None or answer is Ellipsis:
        word = name.split("(")[0].split()[0]
        pattern = re.compile(rf"^\s*(def|class)\s+{re.escape(word)}\b|^{re.escape(word)}\s*=", re.M)
        failed = next((error for source, error in FAILED_CELLS if pattern.search(source)), None)
        if failed is None:
            raise Wrong(f"{name} is not defined yet: write it, then run its cell and fix any error it shows")
        kind = "an import failed: " if failed.startswith(("ModuleNotFoundError", "ImportError")) else ""
        raise Wrong(f"{name} is not defined: its cell stopped before defining it, {kind}{failed}")
    return answer


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise Wrong in the block after ``seconds`` (an endless loop); a no-op where there is no SIGALRM."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise Wrong(f"stopped after {seconds:g} s: is there an endless loop?")

    previous = signal.signal(signal.SIGALRM, stop)
    outer, _ = signal.getitimer(signal.ITIMER_REAL)  # a limit on the whole cell, if one is running
    start = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:  # the cell's limit goes on, less the time this block took
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - start), 0.001))


class RemoteAnswer:
    """What stands, in a grader's process, for an answer that lives in a submission's process.

    The grader (``book_tools.coursework``, the book's tools, apart from this library) makes them;
    :func:`call` asks one to make the call there, its arguments and its result passing as data.
    """

    __slots__ = ()

    def _call_there(self, args: tuple, kwargs: dict, name: str, seconds: float) -> Any:
        raise NotImplementedError


def call(function: Any, *args: Any, name: str, seconds: float = CALL_SECONDS, **kwargs: Any) -> Any:
    """``function(*args, **kwargs)``, its failure turned into one line naming the call.

    An answer in a submission's process (a :class:`RemoteAnswer`) is called there, and a call past
    ``seconds`` kills that process from outside.
    """
    function = defined(function, name)
    if isinstance(function, RemoteAnswer):
        return function._call_there(args, kwargs, name, seconds)
    if not callable(function):
        raise Wrong(f"{name} should be a function, got {type(function).__name__}")
    code = _code_of(function)
    if code in _ENDLESS:
        raise Wrong(f"{name} was stopped earlier after running too long: is there an endless loop?")
    try:
        with time_limit(seconds):
            return function(*args, **kwargs)
    except Wrong as wrong:
        if str(wrong).startswith("stopped after"):
            _ENDLESS.add(code)
            raise Wrong(f"{name} {wrong}") from None
        raise
    except Exception as error:
        raise raised(name, type(error).__name__, error) from None


def raised(name: str, kind: str, message: object) -> Wrong:
    """The line a learner reads when ``name`` raised ``kind``, in this process or a sandbox's."""
    detail = f": {message}" if str(message) else ""
    hint = " (an import missing, or a cell that failed?)" if kind == "NameError" else ""
    return Wrong(f"{name} raised {kind}{detail}{hint}")


def _code_of(function: Any) -> Any:
    """What identifies a call's code across calls: a function's code, a module's forward, a class's __init__."""
    if isinstance(function, type):
        function = function.__init__
    elif not hasattr(function, "__code__") and not hasattr(function, "__func__"):
        function = getattr(type(function), "forward", None) or type(function).__call__
    function = getattr(function, "__func__", function)
    return getattr(function, "__code__", function)


def tensor_of(out: Any, shape: tuple[int, ...], what: str) -> Tensor:
    """``out`` as a tensor of ``shape`` (the first of a tuple, as attention returns (output, weights))."""
    if isinstance(out, tuple) and out:
        out = out[0]
    if not isinstance(out, Tensor):
        raise Wrong(f"{what} should return a tensor, got {type(out).__name__}")
    if tuple(out.shape) != shape:
        raise Wrong(f"{what} returned shape {tuple(out.shape)}, expected {shape}")
    return out


def list_of(out: Any, what: str) -> list:
    """``out`` as a list (a tuple too), or Wrong saying what came back: a stub's None, not a TypeError."""
    if not isinstance(out, (list, tuple)):
        raise Wrong(f"{what} should return a list, got {type(out).__name__}")
    return list(out)


def close(a: Tensor, b: Tensor, atol: float = 1e-5) -> bool:
    """Equal to rounding, compared in float64 (NaN is never close)."""
    return bool(torch.allclose(a.double(), b.double(), atol=atol, rtol=1e-4))


def gap(a: Tensor, b: Tensor) -> str:
    """The largest difference between two tensors, for a message."""
    return f"{(a.double() - b.double()).abs().max().item():.3g}"


def expect_close(out: Tensor, expected: Tensor, what: str, atol: float = 1e-5, hint: str = "") -> None:
    """Wrong unless ``out`` equals ``expected`` to rounding, saying by how much they differ and,
    with ``hint``, where to look (a question to ask of one's code, never the expected values)."""
    if out.shape != expected.shape:
        raise Wrong(f"{what} has shape {tuple(out.shape)}, expected {tuple(expected.shape)}")
    if not close(out, expected, atol):
        raise Wrong(
            f"{what} differs from the expected values by up to {gap(out, expected)}{': ' if hint else ''}{hint}"
        )


def expect_number(got: Any, expected: float, what: str, rel_tol: float = 1e-6) -> None:
    """Wrong unless ``got`` is a number equal to ``expected``."""
    if isinstance(got, bool) or not isinstance(got, (int, float)) or not math.isclose(got, expected, rel_tol=rel_tol):
        raise Wrong(f"{what} = {got!r}, expected {expected:,.6g}")


def inputs(*shape: int, seed: int = 0, scale: float = 1.0) -> Tensor:
    """Random normal inputs from their own generator: the same on every run, the learner's seed untouched."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale


GRADING_ONLY = ("Draws", "without", "globals_of", "standing_in", "placed", "gradient", "inherits", "translation_bleu")


def __getattr__(name: str) -> Any:
    """Say in one line where a grading-only helper is, to a test written for an older version of the book."""
    if name in GRADING_ONLY:
        raise ImportError(f"{name} is the book's tools' now: from book_tools.coursework.checks import {name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


HANDED_IN_HINT = "hand in your translations beside the notebook as UTF-8 text, one a line (translations.de-en.txt)"


def handed_in_lines(path: Any, name: str = "translations_file") -> list[str]:
    """The lines of a file handed in beside the notebook, or Wrong saying what to hand in.

    ``path`` is the notebook's name for it, a string: it must name a file in the folder being graded
    (the grader's copy of what was handed in, never a file elsewhere), in UTF-8 (a byte-order mark
    allowed), any line ends.
    """
    path = defined(path, name)
    if not isinstance(path, (str, Path)):
        raise Wrong(f"{name} should be the file's name, a string, got {type(path).__name__}: {HANDED_IN_HINT}")
    file = Path(path)
    here = Path.cwd().resolve()
    try:
        inside = file.resolve().is_relative_to(here)
    except (OSError, ValueError):
        inside = False
    if not inside:
        raise Wrong(f"{name} names {path}, not a file handed in beside the notebook: {HANDED_IN_HINT}")
    if not file.is_file():
        raise Wrong(f"no file {path} next to the notebook: run the cells above, or {HANDED_IN_HINT}")
    try:
        text = file.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError:
        raise Wrong(f"{file.name} is not UTF-8 text (saved as UTF-16?): {HANDED_IN_HINT}") from None
    return text.splitlines()
