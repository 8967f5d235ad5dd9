"""ONNX Runtime Web, the JavaScript runtime of the book's in-browser translator, fetched like Multi30k.

The files come from npm's registry as the published package tarball, pinned to one version and
checked against the SHA-512 the registry publishes for it (``dist.integrity``), then cached in
``onnxruntime-web/`` under the package's cache folder (``$TRANSFORMER_LIB_CACHE``, else
``$XDG_CACHE_HOME/transformer_lib``, else ``~/.cache/transformer_lib``). Without internet, put the
tarball in a folder and name it in ``ONNXRUNTIME_WEB_DIR``. No Node.js is needed: the book build
only unpacks three files of the tarball's ``dist/`` folder: the WebAssembly build, single-threaded
use (a static site cannot enable the cross-origin isolation that threads need).
"""

from __future__ import annotations

import base64
import os
import tarfile
from pathlib import Path

from transformer_lib.data import DataError, cache_root, fetch_verified
from transformer_lib.files import file_digest, write_bytes

VERSION = "1.30.0"
TARBALL = f"onnxruntime-web-{VERSION}.tgz"
URL = f"https://registry.npmjs.org/onnxruntime-web/-/{TARBALL}"
SHA512 = "q0y+JrrtukXSzsBWEMccVfqX25LRmosXHF+CaRJmg8pZClzcV7svNc4rKY3jL02Vb7QmRMDs1SigqR4CXAfKYQ=="  # npm's integrity
FILES = ("ort.wasm.min.mjs", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm")
LOCAL_DIR_ENV = "ONNXRUNTIME_WEB_DIR"


def _verify(path: Path, fix: str) -> Path:
    actual = base64.b64encode(file_digest(path, "sha512").digest()).decode()  # npm's integrity form
    if actual != SHA512:
        raise DataError(
            f"checksum mismatch for {path}: expected SHA-512 {SHA512}, got {actual}. "
            f"It is not onnxruntime-web {VERSION} as published on npm; {fix}"
        )
    return path


def fetch() -> Path:
    """The verified tarball of onnxruntime-web, downloaded into the cache if needed."""
    return fetch_verified(
        TARBALL, URL, LOCAL_DIR_ENV, cache_root() / "onnxruntime-web", _verify, f"the npm tarball {TARBALL}"
    )


def install(dest: str | os.PathLike) -> list[Path]:
    """Unpack the runtime's files (``FILES``) into ``dest``; returns their paths."""
    written = []
    with tarfile.open(fetch(), "r:gz") as tar:
        for name in FILES:
            member = tar.extractfile(f"package/dist/{name}")
            written.append(write_bytes(Path(dest) / name, member.read()))
    return written
