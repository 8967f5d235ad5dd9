"""Filing a sweep's records under ``results/``: its bulk packed into one archive, its summaries kept as files.

:mod:`transformer_lib.records` reads a record either way, so lessons and tests read the same path
before and after a sweep is filed. Use it on a sweep unpacked into ``results/`` (``python -m
book_tools sweep --archive``'s ``.tar.gz`` extracted in place)::

    python -m book_tools.records results/multi30k/round4/r4s_de_en-seed1
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import sys
import tarfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from transformer_lib.errors import MissingFile
from transformer_lib.files import atomic_path, write_bytes
from transformer_lib.records import archive_of, read_bytes

# What a run folder keeps as files: its config and its JSON summaries (scores.json, curve.json,
# environment.json, the scores of ablations); everything else of a sweep goes into its archive.
SUMMARIES = ("config.yaml", "*.json")
# What a sweep keeps as files besides its runs' summaries (text written for people, and the sweep's own summary).
SWEEP_FILES = ("sweep.json", "README.md", "summary.txt", "device.txt")


def _tokenizer_name(data: bytes, config: Path) -> str:
    """``bpe8000_8d22494f.model``: the tokenizer's kind and vocabulary (from its run's config), then its digest."""
    import yaml  # only filing needs it

    settings = (yaml.safe_load(config.read_text(encoding="utf-8")) or {}).get("data", {}) if config.is_file() else {}
    kind = f"{settings.get('tokenizer', 'bpe')}{settings.get('vocab_size', '')}"
    return f"{kind}_{hashlib.sha256(data).hexdigest()[:8]}.model"


def _is_unit(folder: Path) -> bool:
    """Whether ``folder`` is packed on its own: a sweep (it has a ``sweep.json``) or a folder already packed."""
    return (folder / "sweep.json").is_file() or folder.with_name(folder.name + ".tar.gz").is_file()


def _is_bulk(path: Path, folder: Path) -> bool:
    """Whether ``path``, a file inside the sweep ``folder``, goes into the sweep's archive."""
    if path.name.endswith(".tar.gz"):
        return False  # a nested sweep's archive
    between = path.relative_to(folder).parts[:-1]
    if any(_is_unit(folder.joinpath(*between[: i + 1])) for i in range(len(between))):
        return False  # a nested sweep's: its own archive holds it
    if not between:
        return path.name not in SWEEP_FILES
    if "configs" in between or "logs" in between:
        return True
    in_run = any((folder.joinpath(*between[: i + 1]) / "config.yaml").is_file() for i in range(len(between)))
    return in_run and not any(path.match(pattern) for pattern in SUMMARIES)


def file_sweep(
    folder: str | os.PathLike, tokenizers: str | os.PathLike, keep: Iterable[str | os.PathLike] = ()
) -> Path:
    """Pack the bulk of the sweep in ``folder`` into ``<folder>.tar.gz`` beside it and remove it from the folder.

    The bulk: every run's files but its ``SUMMARIES``, the sweep's ``configs/`` and ``logs/``,
    and the files at its top but ``SWEEP_FILES``; records of other kinds (a folder of timings)
    and nested sweeps, packed on their own first, stay. So do the paths in ``keep``. Each
    ``tokenizer.model`` is stored once in ``tokenizers`` and linked from the archive. An archive
    already there keeps its members, so a sweep can be packed in steps. Every packed file is read
    back from the new archive before it is removed. Returns the archive's path.
    """
    folder, tokenizers = Path(folder), Path(tokenizers)
    if not folder.is_dir():
        raise MissingFile(f"no sweep folder {folder} to file")
    archive = folder.with_name(folder.name + ".tar.gz")
    keep = {Path(p).resolve() for p in keep}
    loose = [p for p in sorted(folder.rglob("*")) if p.is_file() and p.resolve() not in keep and _is_bulk(p, folder)]
    members: dict[str, tuple[tarfile.TarInfo, bytes | None]] = {}
    if archive.is_file():
        with tarfile.open(archive, "r:gz") as tar:
            for info in tar.getmembers():
                members[info.name] = (info, None if info.issym() else tar.extractfile(info).read())
    for path in loose:
        name = (Path(folder.name) / path.relative_to(folder)).as_posix()
        info, data = tarfile.TarInfo(name), path.read_bytes()
        info.mode, info.mtime = 0o644, int(path.stat().st_mtime)
        if path.name == "tokenizer.model":
            shared = tokenizers / _tokenizer_name(data, path.parent / "config.yaml")
            if not shared.is_file() and archive_of(shared) is None:
                write_bytes(shared, data)  # whole or not at all: later runs link to it
            info.type, info.linkname = tarfile.SYMTYPE, os.path.relpath(shared, path.parent)
            members[name] = (info, None)
        else:
            info.size = len(data)
            members[name] = (info, data)
    with atomic_path(archive) as tmp:
        with tarfile.open(tmp, "w:gz", compresslevel=9) as tar:
            for name in sorted(members):
                info, data = members[name]
                tar.addfile(info, None if data is None else io.BytesIO(data))
        with tarfile.open(tmp, "r:gz") as tar:  # the archive as written, checked against every file it replaces
            for path in loose:
                info = tar.getmember((Path(folder.name) / path.relative_to(folder)).as_posix())
                got = read_bytes(path.parent / info.linkname) if info.issym() else tar.extractfile(info).read()
                if got != path.read_bytes():
                    raise RuntimeError(f"{path} did not pack as it was; nothing was removed")
    for path in loose:
        path.unlink()
    for sub in sorted((p for p in folder.rglob("*") if p.is_dir()), reverse=True):
        if not any(sub.iterdir()):
            sub.rmdir()
    if not any(folder.iterdir()):  # all of it packed (the shared tokenizers): the archive stands for it
        folder.rmdir()
    return archive


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m book_tools.records FOLDER...``: file each sweep folder, then the shared tokenizers.

    Use it on a sweep unpacked into ``results/`` (``sweep --archive``'s ``.tar.gz`` extracted in
    place): nested sweeps first, as given. A new tokenizer joins ``--tokenizers``' archive.
    """
    parser = argparse.ArgumentParser(prog="python -m book_tools.records", description=main.__doc__)
    parser.add_argument("folders", nargs="+", type=Path, help="sweep folders under results/, nested ones first")
    parser.add_argument("--tokenizers", type=Path, default=Path("results/multi30k/tokenizers"))
    args = parser.parse_args(argv)
    try:
        for folder in args.folders:
            print(f"{file_sweep(folder, args.tokenizers)}")
        if args.tokenizers.is_dir():
            print(f"{file_sweep(args.tokenizers, args.tokenizers)}")
    except MissingFile as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
