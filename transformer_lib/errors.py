"""The package's own errors: each message says what was wrong and what to do about it.

They subclass the built-in exception a caller would expect (``InvalidValue`` is a
``ValueError``), so ``except ValueError`` still catches them. In a notebook, IPython shows them
as one line (through its ``_render_traceback_`` hook) instead of a traceback through the
package's internals and the paths of the machine that ran it.

The config dataclasses check their fields here, so that a wrong value fails where it is set.
YAML and Python both let a value of the wrong type through: ``norm_first: "no"`` is a truthy
string, ``dropout: "high"`` fails later inside a comparison, ``splits: val`` is iterated letter by
letter. :func:`check_fields` compares every field with its annotation (``int``, ``float``,
``bool``, ``str``, ``X | None``, ``tuple[X, ...]``) and raises one :class:`~transformer_lib.errors.InvalidValue` that
names the field; each dataclass then checks its own ranges.
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing


class TransformerLibError(Exception):
    """Base of the package's errors; shown in notebooks as ``Name: message``."""

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


class InvalidValue(TransformerLibError, ValueError):
    """An argument, config field or tensor has a value (or shape) the package cannot use."""


class InvalidType(TransformerLibError, TypeError):
    """An argument has the wrong type (say, float token ids)."""


class MissingFile(TransformerLibError, FileNotFoundError):
    """A file the call needs (config, tokenizer, checkpoint) does not exist."""


class Interrupted(TransformerLibError):
    """Training was stopped (Ctrl-C, or SIGTERM from a scheduler) after writing a checkpoint."""


class UnsupportedVersion(TransformerLibError, ImportError):
    """The Python or PyTorch is older than the package supports (raised on import)."""


def _matches(value: object, kind: object) -> bool:
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, k) for k in typing.get_args(kind))
    if kind is type(None):
        return value is None
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is str:
        return isinstance(value, str)
    if origin is tuple:
        args = typing.get_args(kind)
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_matches(v, args[0]) for v in value)
        return len(value) == len(args) and all(_matches(v, k) for v, k in zip(value, args, strict=True))
    return True  # a type this module does not check


# How a message names one value of a type, and several: "must be an integer", "a list of integers".
NAMES = {
    bool: ("true or false", "true or false values"),
    int: ("an integer", "integers"),
    float: ("a number", "numbers"),
    str: ("a string", "strings"),
}


def _describe(kind: object) -> str:
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(k) for k in typing.get_args(kind))
    if kind is type(None):
        return "null"
    if origin is tuple:
        args = typing.get_args(kind)
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a list of {NAMES[args[0]][1] if args[0] in NAMES else _describe(args[0])}"
        return f"a list of {len(args)}: " + ", ".join(map(_describe, args))
    return NAMES[kind][0] if kind in NAMES else str(kind)


def check_fields(obj: object) -> None:
    """Raise :class:`~transformer_lib.errors.InvalidValue` for the first field of ``obj`` with a wrong type."""
    hints = typing.get_type_hints(type(obj))
    for field in dataclasses.fields(obj):
        value, kind = getattr(obj, field.name), hints[field.name]
        if not _matches(value, kind):
            shown = list(value) if isinstance(value, tuple) else value  # as the reader wrote it: a list
            raise InvalidValue(f"{field.name} must be {_describe(kind)}, got {shown!r}")


def check_range(
    obj: object, name: str, low: float | None = None, high: float | None = None, *, closed_high=True
) -> None:
    """Raise :class:`~transformer_lib.errors.InvalidValue` unless ``low <= obj.name`` (and ``<= high``,
    or ``< high``); None passes."""
    value = getattr(obj, name)
    if value is None:
        return
    if (low is not None and value < low) or (high is not None and (value > high if closed_high else value >= high)):
        if high is None:
            bound = f"at least {low}"
        else:
            bound = f"in [{low}, {high}{']' if closed_high else ')'}"
        raise InvalidValue(f"{name} must be {bound}, got {value!r}")


def moved(command: str) -> int:
    """Say in one line where a command that moved to the book's tools is now; the exit code of a usage error."""
    print(
        f"error: this is the book's tools' command now: python -m {command} ... "
        "(in a checkout of the book; pip install -e ./tools first, or PYTHONPATH=tools)",
        file=sys.stderr,
    )
    return 2
