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
``read_text(run / "metrics.csv")`` works before and after a sweep is packed; the book's tools
pack it (``python -m book_tools.records FOLDER``, in the repository's ``tools/`` folder).

Lesson 11 and its appendix read the same records the same way: :func:`seed_curves` and
:func:`mean_curves` turn a recipe's seeds into its learning curve (BLEU after 5, 10 and 20 minutes),
:func:`results_folder` finds the records (cloning the repository where a lesson is alone),
:func:`cpu_recipes` reads the CPU recipes' seeds that way, :func:`speed_record` a timing record,
and :func:`recipe_summary` prints the recipe a run recorded.
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import subprocess
import tarfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from transformer_lib.errors import MissingFile


def results_folder(repository: str) -> Path:
    """The book's committed records, ``results/``: beside the lessons in a checkout of the book, or (as on
    Colab, where a lesson is alone) in a shallow clone of ``repository``, made once in the working folder."""
    beside = Path("../results")
    if beside.is_dir():
        return beside
    clone = Path(repository.rstrip("/").rsplit("/", 1)[-1])
    if not clone.is_dir():
        try:
            subprocess.run(["git", "clone", "-q", "--depth", "1", repository, str(clone)], check=True)
        except (OSError, subprocess.CalledProcessError) as exc:
            raise MissingFile(f"no results/ beside this notebook, and cloning {repository} failed ({exc})") from None
    return clone / "results"


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


class CpuRecipes(NamedTuple):
    """The CPU recipes' records (``results/multi30k/cpu``), as lesson 11 and its appendix read them."""

    seeds: dict[str, Path]  # direction -> the first recipe's seeds (sinusoidal positions)
    recipe: dict[str, Path]  # direction -> the packaged recipe's seeds (rotary positions)
    runs: dict[str, list[dict]]  # direction -> the first recipe's seeds' curve.json
    recipe_runs: dict[str, list[dict]]  # every recipe's seeds' curve.json: "de→en", ..., "de→en, sinusoidal"
    curves: dict[str, dict[float, CurvePoint]]  # recipe -> minutes -> its seeds in the mean
    forty: dict  # the first de→en recipe's run that went on to 40 minutes: its 40-minute point


def cpu_recipes(cpu: str | os.PathLike) -> CpuRecipes:
    """Read the CPU recipes' seeds in ``cpu``; print each recipe's curve (:func:`mean_curves`) and the 40-minute run.

    The sinusoidal English→German seeds were decoded with a length penalty of 0.6, the rotary ones with 1.4.
    """
    cpu = Path(cpu)
    seeds = {"de→en": cpu / "seeds", "en→de": cpu / "seeds_en_de"}
    recipe = {"de→en": cpu / "seeds_rotary", "en→de": cpu / "seeds_rotary_en_de_alone"}
    runs = {direction: seed_curves(folder) for direction, folder in seeds.items()}
    recipe_runs = {direction: seed_curves(folder) for direction, folder in recipe.items()}
    recipe_runs |= {f"{direction}, sinusoidal": first for direction, first in runs.items()}
    longer = json.loads(read_text(cpu / "de_en" / "curve.json"))
    forty = next(point for point in longer["points"] if point["minutes"] == 40)
    curves = mean_curves(recipe_runs)
    print(
        f"de→en, sinusoidal, one run of 40 minutes: {forty['step']:,} updates, "
        f"test_2016_flickr {curve_bleu(forty):.2f}, val {curve_bleu(forty, 'val'):.2f}"
    )
    return CpuRecipes(seeds, recipe, runs, recipe_runs, curves, forty)


def speed_record(folder: str | os.PathLike, name: str) -> dict:
    """``<folder>/<name>.json``: variants timed side by side in one process on one machine, with
    ``rates`` added: variant -> updates a second."""
    record = json.loads(read_text(Path(folder) / f"{name}.json"))
    record["rates"] = {row["variant"]: row["updates_per_s"] for row in record["rows"]}
    return record


def recipe_summary(run: str | os.PathLike) -> str:
    """The recipe the run folder ``run`` recorded in its ``config.yaml``, in five entries for a reader.

    The model's shape, the vocabulary, the batches, the learning-rate schedule with its peak
    (lr_factor · d_model^-0.5 · warmup^-0.5) and budget, and how the final model is chosen and decoded.
    """
    from transformer_lib.training.run_config import load_config  # the records' reader needs no YAML otherwise
    from transformer_lib.training.schedules import noam_lr

    config = load_config(str(Path(run) / "config.yaml"))
    m, t = config.model, config.training
    peak = noam_lr(t.warmup, m.d_model, t.warmup, t.lr_factor)  # the rate at the end of the warm-up
    warmup = f"warm-up {t.warmup:,} steps to a peak learning rate of {peak:.4f}"
    schedule = {
        "noam": f"{warmup}, then 1/sqrt(step)",
        # the line falls from the first second, so the warm-up ends below the paper's peak
        "time_linear": f"warm-up {t.warmup:,} steps towards {peak:.4f}, times a line falling to 0 at the time budget",
        "cooldown": f"{warmup}, then 1/sqrt(step), falling to 0 over the last {t.cooldown:.0%} of the budget",
    }[t.schedule]
    budget = [f"{t.max_steps:,} updates"] if t.max_steps is not None else []
    budget += [f"{t.max_minutes} minutes"] if t.max_minutes is not None else []
    return "\n".join(
        (
            f"model: {m.n_layers}+{m.n_layers} layers, d_model {m.d_model}, d_ff {m.d_ff}, "
            f"{m.n_heads} heads,\n       dropout {m.dropout}, norm_first {m.norm_first}, "
            f"tied embeddings {m.tie_embeddings}",
            f"data: shared {config.data.tokenizer.upper()} vocabulary of {config.data.vocab_size:,}, "
            "learned from the training split only",
            f"batches: {config.task.max_tokens:,} token slots, label smoothing {config.task.label_smoothing}",
            f"schedule: {schedule};\n          at most {' or '.join(budget) or f'{t.epochs} epochs'}",
            f"evaluation: the mean of the last {config.evaluation.average_last} checkpoints, "
            f"beam {config.decoding.beam_size}, length penalty {config.decoding.alpha}",
        )
    )


if __name__ == "__main__":  # its command line moved to the book's tools
    from transformer_lib.errors import moved

    raise SystemExit(moved("book_tools.records"))
