"""The committed records of runs (``results/``): read a file whether it lies loose or in its sweep's archive.

A run folder keeps its small summaries as files (``scores.json``, ``curve.json``, ``config.yaml``,
``environment.json``), and each sweep's ``sweep.json`` stays beside them. The bulk of a sweep (every
run's ``metrics.csv``, ``log.txt`` and hypotheses, the sweep's ``configs/`` and ``logs/``) is packed
into one ``<sweep>.tar.gz`` beside the sweep's folder, in the format of ``sweep --archive``
(members named ``<sweep>/<run>/<file>``), so a clone stays small. A run's ``tokenizer.model`` is a
link in the archive to the one copy of that tokenizer in a ``tokenizers/`` folder: many runs
trained the same one. ``tar -xzf seeds.tar.gz`` inside the sweep's parent folder puts every file
back in place, links included.

:func:`read_bytes` and :func:`read_text` find a file either way, so code that reads
``read_text(run / "metrics.csv")`` works before and after a sweep is packed. :func:`file_sweep`
packs a sweep's bulk that way; ``python -m transformer_lib.records FOLDER`` does it for a sweep just
unpacked into ``results/``.

Lesson 11 and its appendix read the same records the same way: :func:`seed_curves` and
:func:`mean_curves` turn a recipe's seeds into its learning curve (BLEU after 5, 10 and 20 minutes),
and :func:`recipe_summary` prints the recipe a run recorded.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import io
import json
import os
import statistics
import sys
import tarfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from transformer_lib.errors import MissingFile
from transformer_lib.files import atomic_path

# What a run folder keeps as files: its config and its JSON summaries (scores.json, curve.json,
# environment.json, the scores of ablations); everything else of a sweep goes into its archive.
SUMMARIES = ("config.yaml", "*.json")
# What a sweep keeps as files besides its runs' summaries (text written for people, and the sweep's own summary).
SWEEP_FILES = ("sweep.json", "README.md", "summary.txt", "device.txt")


@functools.lru_cache(maxsize=4)
def _members(archive: Path, stamp: tuple[int, int]) -> dict[str, bytes | str]:
    """Every file of ``archive``: its bytes, or for a link the path it points to. Cached by the archive's
    size and time (``stamp``): a lesson reads many files of one sweep, and a gzip stream is read whole."""
    with tarfile.open(archive, "r:gz") as tar:
        return {i.name: i.linkname if i.issym() else tar.extractfile(i).read() for i in tar if i.isfile() or i.issym()}


def archive_of(path: str | os.PathLike) -> tuple[Path, str] | None:
    """The archive that holds ``path`` and the member's name in it, or None.

    The nearest folder above ``path`` with a ``<folder>.tar.gz`` beside it whose members include
    ``<folder>/<rest of path>`` is the one.
    """
    path = Path(path)
    for folder in path.parents:
        if not folder.name:  # the top of a relative path, or the root
            break
        archive = folder.with_name(folder.name + ".tar.gz")
        if archive.is_file():
            member = (Path(folder.name) / path.relative_to(folder)).as_posix()
            if member in _members(archive, _stamp(archive)):
                return archive, member
    return None


def _stamp(archive: Path) -> tuple[int, int]:
    stat = archive.stat()
    return stat.st_size, stat.st_mtime_ns


def read_bytes(path: str | os.PathLike) -> bytes:
    """The bytes of the record file ``path``: the file itself if it lies loose, else its archive's member."""
    path = Path(path)
    if path.is_file():
        return path.read_bytes()
    found = archive_of(path)
    if found is None:
        raise MissingFile(f"no record {path}: neither a file nor in a sweep archive beside a folder above it")
    archive, member = found
    data = _members(archive, _stamp(archive))[member]
    if isinstance(data, str):  # a shared tokenizer: the link points from the member's place to its one copy
        return read_bytes(path.parent / data)
    return data


def read_text(path: str | os.PathLike, encoding: str = "utf-8") -> str:
    """The text of the record file ``path`` (see :func:`read_bytes`)."""
    return read_bytes(path).decode(encoding)


class CurvePoint(NamedTuple):
    """A recipe's seeds after some minutes of training, in the mean: updates, test BLEU (mean, sd), val BLEU."""

    updates: float
    test: float
    test_sd: float
    val: float


def seed_runs(folder: str | os.PathLike) -> list[Path]:
    """The run folders of a recipe's seeds in ``folder`` (named ``*-seed*``), seed 0 first."""
    return sorted(Path(folder).glob("*-seed*"))


def seed_curves(folder: str | os.PathLike) -> list[dict]:
    """Each seed's ``curve.json`` in ``folder`` (see :func:`seed_runs`), seed 0 first.

    A ``curve.json`` holds the run's model scored after each of its ``snapshot_minutes`` (``points``)
    and the machine it trained on (``environment``).
    """
    return [json.loads(read_text(seed / "curve.json")) for seed in seed_runs(folder)]


def curve_bleu(point: dict, split: str = "test_2016_flickr") -> float:
    """The cased sacreBLEU of one point of a ``curve.json`` on ``split``."""
    return point["splits"][split]["sacrebleu_cased"]


def mean_curves(
    recipes: Mapping[str, Sequence[dict]], minutes: Sequence[float] = (5, 10, 20), split: str = "test_2016_flickr"
) -> dict[str, dict[float, CurvePoint]]:
    """Each recipe's seeds (their ``curve.json``, see :func:`seed_curves`) in the mean at each of ``minutes``.

    Prints, for each recipe, the machine its first seed names and a line a minute: the mean updates,
    BLEU on ``split`` (mean ± standard deviation over the seeds) and the mean BLEU on ``val``. The
    spread is of the seeds, so a difference smaller than it is noise.
    """
    curves = {}
    for name, per_seed in recipes.items():
        env = per_seed[0]["environment"]
        print(
            f"{name}: {len(per_seed)} seeds, {env['cpu']}, {env['cpu_threads']} threads, "
            f"torch {env['torch']}, first started {env['started_utc'][:16]}"
        )
        curves[name] = {}
        for at_minutes in minutes:
            at = [next(p for p in run["points"] if p["minutes"] == at_minutes) for run in per_seed]
            tests = [curve_bleu(p, split) for p in at]
            point = CurvePoint(
                updates=statistics.mean(p["step"] for p in at),
                test=statistics.mean(tests),
                test_sd=statistics.stdev(tests),
                val=statistics.mean(curve_bleu(p, "val") for p in at),
            )
            curves[name][at_minutes] = point
            print(
                f"   {at_minutes:>4g} min: {point.updates:6,.0f} updates   sacreBLEU {split} "
                f"{point.test:5.2f} ± {point.test_sd:.2f}, val {point.val:5.2f}"
            )
    return curves


def recipe_summary(run: str | os.PathLike) -> str:
    """The recipe the run folder ``run`` recorded in its ``config.yaml``, in five lines for a reader.

    The model's shape, the vocabulary, the batches, the learning-rate schedule with its peak
    (lr_factor · d_model^-0.5 · warmup^-0.5) and how the final model is chosen and decoded.
    """
    from transformer_lib.training.run_config import load_config  # the records' reader needs no YAML otherwise

    config = load_config(str(Path(run) / "config.yaml"))
    m, t = config.model, config.training
    peak = t.lr_factor * m.d_model**-0.5 * t.warmup**-0.5
    return "\n".join(
        (
            f"model: {m.n_layers}+{m.n_layers} layers, d_model {m.d_model}, d_ff {m.d_ff}, "
            f"{m.n_heads} heads,\n       dropout {m.dropout}, norm_first {m.norm_first}, "
            f"tied embeddings {m.tie_embeddings}",
            f"data: shared {config.data.tokenizer.upper()} vocabulary of {config.data.vocab_size:,}, "
            "learned from the training split only",
            f"batches: {config.task.max_tokens:,} token slots, label smoothing {config.task.label_smoothing}",
            f"schedule: warm-up {t.warmup:,} steps to a peak learning rate of {peak:.4f}, "
            f"then 1/sqrt(step);\n          at most {t.max_steps:,} updates or {t.max_minutes} minutes",
            f"evaluation: the mean of the last {config.evaluation.average_last} checkpoints, "
            f"beam {config.decoding.beam_size}, length penalty {config.decoding.alpha}",
        )
    )


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
                shared.parent.mkdir(parents=True, exist_ok=True)
                shared.write_bytes(data)
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
    """``python -m transformer_lib.records FOLDER...``: file each sweep folder, then the shared tokenizers.

    Use it on a sweep unpacked into ``results/`` (``sweep --archive``'s ``.tar.gz`` extracted in
    place): nested sweeps first, as given. A new tokenizer joins ``--tokenizers``' archive.
    """
    parser = argparse.ArgumentParser(prog="python -m transformer_lib.records", description=main.__doc__)
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
