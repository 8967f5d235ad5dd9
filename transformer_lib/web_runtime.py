"""ONNX Runtime Web, the JavaScript runtime of the book's in-browser translator, fetched like Multi30k.

The files come from npm's registry as the published package tarball, pinned to one version and
checked against the SHA-512 the registry publishes for it (``dist.integrity``), then cached
(``$TRANSFORMER_LIB_CACHE``, else ``~/.cache/transformer_lib``). Without internet, put the
tarball in a folder and name it in ``ONNXRUNTIME_WEB_DIR``. No Node.js is needed: the book build
only unpacks three files of the tarball's ``dist/`` folder: the WebAssembly build, single-threaded
use (a static site cannot enable the cross-origin isolation that threads need).
"""

from __future__ import annotations

import base64
import hashlib
import os
import tarfile
from pathlib import Path

from transformer_lib.data import DataError, cache_root, download
from transformer_lib.files import write_bytes

VERSION = "1.30.0"
TARBALL = f"onnxruntime-web-{VERSION}.tgz"
URL = f"https://registry.npmjs.org/onnxruntime-web/-/{TARBALL}"
SHA512 = "q0y+JrrtukXSzsBWEMccVfqX25LRmosXHF+CaRJmg8pZClzcV7svNc4rKY3jL02Vb7QmRMDs1SigqR4CXAfKYQ=="  # npm's integrity
FILES = ("ort.wasm.min.mjs", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm")
LOCAL_DIR_ENV = "ONNXRUNTIME_WEB_DIR"


def _verify(path: Path, fix: str) -> Path:
    digest = hashlib.sha512()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    actual = base64.b64encode(digest.digest()).decode()
    if actual != SHA512:
        raise DataError(
            f"checksum mismatch for {path}: expected SHA-512 {SHA512}, got {actual}. "
            f"It is not onnxruntime-web {VERSION} as published on npm; {fix}"
        )
    return path


def fetch() -> Path:
    """The verified tarball of onnxruntime-web, downloaded into the cache if needed."""
    local = os.environ.get(LOCAL_DIR_ENV)
    if local:
        path = Path(local) / TARBALL
        if not path.is_file():
            raise DataError(
                f"{path} does not exist: {LOCAL_DIR_ENV} is set to {local!r}, which should hold {TARBALL} "
                f"(from {URL}). Fix the folder, or unset {LOCAL_DIR_ENV} to download it."
            )
        return _verify(path, f"replace it with the file from {URL}")
    path = cache_root() / "onnxruntime-web" / TARBALL
    if not path.is_file():
        download(
            URL,
            path,
            lambda tmp: _verify(tmp, "the download was damaged; try again"),
            f"put {TARBALL} from {URL} in a folder and set {LOCAL_DIR_ENV} to that folder",
        )
        return path
    return _verify(path, "delete it and it will be downloaded again")


def install(dest: str | os.PathLike) -> list[Path]:
    """Unpack the runtime's files (``FILES``) into ``dest``; returns their paths."""
    written = []
    with tarfile.open(fetch(), "r:gz") as tar:
        for name in FILES:
            member = tar.extractfile(f"package/dist/{name}")
            written.append(write_bytes(Path(dest) / name, member.read()))
    return written
