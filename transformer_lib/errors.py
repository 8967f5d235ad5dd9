"""The package's own errors: each message says what was wrong and what to do about it.

They subclass the built-in exception a caller would expect (``InvalidValue`` is a
``ValueError``), so ``except ValueError`` still catches them. In a notebook, IPython shows them
as one line (through its ``_render_traceback_`` hook) instead of a traceback through the
package's internals and the paths of the machine that ran it.
"""

from __future__ import annotations


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
