"""Multi30k: the book's translation corpus (German, English, French, Czech image captions).

Each file is ``{split}.{lang}.gz``, one sentence a line, line-aligned across languages.
Files come from one of two places:

* a local folder named by the environment variable ``MULTI30K_DIR`` (used as is, for machines
  without internet, such as CI or a GPU box), or
* the canonical address on GitHub, downloaded once into a cache folder
  (``$TRANSFORMER_LIB_CACHE``, else ``$XDG_CACHE_HOME/transformer_lib``, else
  ``~/.cache/transformer_lib``).

Either way every file's SHA-256 is checked against the table below before it is read, so a
truncated download or an edited copy is an error, never silently different data.
"""

from __future__ import annotations

import gzip
import os
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from transformer_lib.errors import InvalidValue, TransformerLibError
from transformer_lib.files import atomic_path, file_digest, sha256_of  # noqa: F401 (data.sha256_of, as before)

BASE_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw"
LOCAL_DIR_ENV = "MULTI30K_DIR"
CACHE_ENV = "TRANSFORMER_LIB_CACHE"

# Sentences per split (the same in every language of that split).
SPLITS: dict[str, int] = {
    "train": 29_000,
    "val": 1_014,
    "test_2016_flickr": 1_000,
    "test_2017_flickr": 1_000,
    "test_2017_mscoco": 461,
}

# SHA-256 of every raw file, as published with the upstream repository's task1/raw folder.
SHA256: dict[str, str] = {
    "test_2016_flickr.cs.gz": "200a4a74cc9560f051924abb9803be008d1908d77f747e9141aeb86dfd2797f1",
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "test_2016_flickr.fr.gz": "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90",
    "test_2017_flickr.de.gz": "a2c89666db00c495cd8513b9d708d5a3acc205d7de312ef2bf5fb7ebc1540aee",
    "test_2017_flickr.en.gz": "76a444ee25172e72695cddb13ae4a3bda59430617be88e0bb46b60504f054074",
    "test_2017_flickr.fr.gz": "3ba671ceb2299f3304ffafefea7a833d08632fbaf0ba18546f8a2ec2391af496",
    "test_2017_mscoco.de.gz": "799e4854c25d601cb6cb6be29eabe5667734c61ace2f495e03e429031a0bc338",
    "test_2017_mscoco.en.gz": "aab300bfb4427697987e02cd0aacd44bfe8aa50456231b6474c08038bbed2b58",
    "test_2017_mscoco.fr.gz": "754f3072ba9f124569ba5258b32730fc1d214bbf8e0c6dfb2b74401676220db0",
    "train.cs.gz": "a65adb8b32e3bc664f21ecba7a6e7f6950fd1f405e135f7c312faabdb6255077",
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "train.fr.gz": "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c",
    "val.cs.gz": "b63226e05c4bd5dd6a42897d74b86a1b9d2c31498252c572b1ea7f7996927fcc",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "val.fr.gz": "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9",
}

LANGUAGES = ("de", "en", "fr", "cs")


class DataError(TransformerLibError, RuntimeError):
    """A Multi30k file is missing, cannot be downloaded, or is not the published file."""


def file_name(split: str, lang: str) -> str:
    """The raw file's name, after checking that Multi30k has this split in this language."""
    if split not in SPLITS:
        raise InvalidValue(f"unknown Multi30k split {split!r}; choose one of {list(SPLITS)}")
    if lang not in LANGUAGES:
        raise InvalidValue(f"unknown Multi30k language {lang!r}; choose one of {list(LANGUAGES)}")
    name = f"{split}.{lang}.gz"
    if name not in SHA256:
        have = [s for s in SPLITS if f"{s}.{lang}.gz" in SHA256]
        raise InvalidValue(f"Multi30k has no {lang!r} text for split {split!r}; {lang!r} exists for {have}")
    return name


def cache_root() -> Path:
    """Where the package keeps what it downloads: Multi30k here, the browser's runtime in
    ``book_tools.web.runtime``, ONNX exports in ``book_tools.web.export`` (the book's tools)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "transformer_lib"


def cache_dir() -> Path:
    """Where downloaded Multi30k files are kept."""
    return cache_root() / "multi30k"


def _verify(path: Path, name: str, fix: str) -> Path:
    actual = sha256_of(path)
    if actual != SHA256[name]:
        raise DataError(
            f"checksum mismatch for {path}: expected SHA-256 {SHA256[name]}, got {actual}. "
            f"The file is corrupted or not the published Multi30k file; {fix}"
        )
    return path


def download(url: str, dest: Path, verify: Callable[[Path], object], offline: str) -> None:
    """Download ``url`` to ``dest`` atomically: a temporary file in the same folder, checked by
    ``verify`` (which raises), then renamed. ``offline`` says what to do without internet.

    A failed download leaves nothing behind: no partial file, and no folder it had to create.
    """
    created = [p for p in (dest.parent, *dest.parent.parents) if not p.exists()]
    try:
        with atomic_path(dest) as tmp:
            with open(tmp, "wb") as out, urllib.request.urlopen(url, timeout=60) as response:
                for block in iter(lambda: response.read(1 << 20), b""):
                    out.write(block)
            verify(tmp)
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise DataError(
            f"could not download {url} ({exc}). Check your internet connection, or {offline}."
        ) from None  # the message says it all: no chained traceback of urllib's internals
    finally:
        for folder in created:  # innermost first; only folders this call made, and only if empty
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()


def fetch_verified(
    name: str, url: str, local_env: str, cache: Path, verify: Callable[[Path, str], Path], what: str
) -> Path:
    """A file checked by ``verify(path, what_to_do)``: from the folder that the environment variable
    ``local_env`` names when it is set, else downloaded from ``url`` into ``cache`` once.
    ``what`` names the files, for the messages (e.g. "the Multi30k .gz files")."""
    local = os.environ.get(local_env)
    if local:
        path = Path(local) / name
        if not path.is_file():
            raise DataError(
                f"{path} does not exist: {local_env} is set to {local!r}, which should hold "
                f"{what} ({name} among them). Fix the folder, or unset {local_env} to download {url}."
            )
        return verify(path, f"replace it with the file from {url}")
    path = cache / name
    if not path.is_file():
        download(
            url,
            path,
            lambda tmp: verify(tmp, f"the download from {url} was damaged; try again"),
            f"put {what} in a folder and set {local_env} to that folder",
        )
        return path
    return verify(path, "delete it and it will be downloaded again")


def fetch(split: str, lang: str) -> Path:
    """Return the path of a verified raw file, downloading it into the cache if needed."""
    name = file_name(split, lang)
    return fetch_verified(
        name,
        f"{BASE_URL}/{name}",
        LOCAL_DIR_ENV,
        cache_dir(),
        lambda path, fix: _verify(path, name, fix),
        "the Multi30k .gz files",
    )


def load_multi30k(split: str, lang: str) -> list[str]:
    """The sentences of one split in one language, stripped of surrounding white space."""
    with gzip.open(fetch(split, lang), "rt", encoding="utf-8") as f:
        sentences = [line.strip() for line in f]
    if len(sentences) != SPLITS[split]:
        raise DataError(f"{split}.{lang} has {len(sentences)} sentences, expected {SPLITS[split]}")
    return sentences


def load_pairs(split: str, src: str, tgt: str) -> list[tuple[str, str]]:
    """Aligned ``(source, target)`` sentence pairs, e.g. ``load_pairs("train", "de", "en")``."""
    return list(zip(load_multi30k(split, src), load_multi30k(split, tgt), strict=True))
