"""Files: never half-written (a temporary name in the same folder, then a rename), and their digests.

A crash, a full disk or Ctrl-C in the middle of a write leaves the old file (or none), never a
truncated one: ``os.replace`` within one folder is atomic. Checkpoints, tokenizers, downloads
and every file a run folder writes whole go through :func:`atomic_path`; its ``metrics.csv`` and
``log.txt`` grow a line at a time (a resumed run cuts ``metrics.csv`` back atomically).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, mode: int = 0o644) -> Iterator[Path]:
    """A temporary path to write ``path``'s content to; renamed to ``path`` if the block succeeds.

    The folder is created if needed. If the block raises, the temporary file is removed and
    ``path`` is left as it was. The file gets ``mode`` (readable by all: a site's files are served;
    0o600 keeps a private one, such as students' grades, to its owner).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, mode)  # mkstemp's 0600 would hide a site's files from its web server
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8, ``\\n`` line ends on every system: the same bytes on Windows) to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8", newline="\n")
    return Path(path)


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def file_digest(path: Path, algorithm: str = "sha256"):
    """The hash object of a file's bytes, read in blocks (``.hexdigest()``, ``.digest()``)."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest


def sha256_of(path: Path) -> str:
    """The SHA-256 of a file's bytes, in hex (downloads, checkpoints, the exported translator)."""
    return file_digest(path).hexdigest()
