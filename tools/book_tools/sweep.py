"""A sweep: many training runs at once on one GPU, and with ``--archive`` one archive of their records.

    python -m book_tools sweep experiments/multi30k/sweep2_final.yaml --out runs/sweep2 --jobs 2

A small Transformer uses a fraction of an H100, so the runs of a sweep train side by side as
separate processes, each in its own run folder. A sweep file is YAML::

    common:                     # sections merged into every run (as in a run config)
      training: {max_minutes: 6}
    runs:
      de_en-anchor:             # the run's name: its folder is <out>/de_en-anchor
        config: multi30k_de_en_small    # the config it starts from (a name or a path)
        model: {d_model: 128}           # then any sections, merged over it and over common

Every run's config is written to ``<out>/configs/<name>.yaml`` and checked before the first
process starts, so a typo fails at once, not after minutes of GPU time. ``only`` (the command's
``--runs``) trains some of a file's runs: the rest of a stopped sweep into the same ``--out``, whose
``sweep.json`` then gains them, or the one run a lent machine has time for. :func:`pack` puts a
sweep's records (configs, environments, metrics, logs, scores, hypotheses, exported half-precision
models) into one ``.tar.gz`` and leaves out the checkpoints. Extracted under ``results/``, such a
sweep is committed with ``python -m book_tools.records FOLDER`` (:mod:`book_tools.records`):
the runs' summaries stay files, the rest goes back into one archive that the code still reads.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import time
from collections.abc import Sequence
from pathlib import Path

import yaml

from transformer_lib import checkpoint
from transformer_lib.errors import InvalidValue, MissingFile
from transformer_lib.files import atomic_path, write_text
from transformer_lib.training.run_config import config_path, load_config, read_yaml

# Files a packed sweep leaves out: the checkpoints, which can be large (exported models are kept).
LEFT_OUT = (checkpoint.CHECKPOINT, checkpoint.AVERAGED, checkpoint.KEPT, checkpoint.SNAPSHOTS)


def _merge(base: dict, extra: dict) -> dict:
    """``base`` with ``extra``'s sections merged in, key by key (a run's section overrides common's)."""
    out = {section: dict(values or {}) for section, values in base.items()}
    for section, values in extra.items():
        if not isinstance(values, dict):
            raise InvalidValue(f"section {section!r} must be a mapping of keys, got {values!r}")
        out[section] = {**out.get(section, {}), **values}
    return out


def _read_mapping(path: Path) -> dict:
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise InvalidValue(f"{path} must hold a mapping, got a {type(raw).__name__}")
    return raw


def plan(sweep_file: str | os.PathLike, out: str | os.PathLike, only: Sequence[str] | None = None) -> dict[str, Path]:
    """Write and check every run's config, once every name in ``only`` is known to be a run of the
    file; returns run name -> config path, in the file's order."""
    sweep_file, out = Path(sweep_file), Path(out)
    if not sweep_file.is_file():
        raise MissingFile(f"no sweep file {sweep_file}")
    raw = _read_mapping(sweep_file)
    unknown = sorted(set(raw) - {"common", "runs"})
    if unknown or not isinstance(raw.get("runs"), dict) or not raw["runs"]:
        raise InvalidValue(f"{sweep_file} must hold 'runs' (a mapping of run names) and optionally 'common'")
    runs = {str(name): run for name, run in raw["runs"].items()}
    missing = [name for name in only or () if name not in runs]
    if missing:
        raise InvalidValue(f"--runs: no run {missing[0]!r} in {sweep_file}; its runs: {', '.join(runs)}")
    configs = {}
    for name, run in runs.items():
        if not isinstance(run, dict) or "config" not in run:
            raise InvalidValue(f"run {name!r} in {sweep_file} needs a 'config' to start from")
        if not re.fullmatch(r"[A-Za-z0-9._-]+", name):
            raise InvalidValue(f"run name {name!r}: use letters, digits, '-', '_' and '.' only (it names a folder)")
        try:
            base = _read_mapping(config_path(run["config"]))
        except MissingFile:
            config = run["config"]
            raise MissingFile(f"run {name!r}: no config {config!r}; give a path or a packaged config's name") from None
        sections = {k: v for k, v in run.items() if k != "config"}
        merged = _merge(_merge(base, raw.get("common") or {}), sections)
        path = out / "configs" / f"{name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, yaml.safe_dump(merged, sort_keys=False))
        try:
            load_config(str(path))
        except InvalidValue as exc:
            raise InvalidValue(f"run {name!r}: {exc}") from None
        configs[name] = path
    return configs


def run_sweep(
    sweep_file: str | os.PathLike,
    out: str | os.PathLike,
    jobs: int,
    device: str = "auto",
    poll: float = 2.0,
    threads: int = 1,
    only: Sequence[str] | None = None,
) -> dict:
    """Train every run of ``sweep_file`` as its own process, at most ``jobs`` at a time.

    Each process gets ``threads`` CPU threads (one is enough to feed a GPU; a CPU sweep of one
    job at a time gives it every core) and writes its output to ``<out>/logs/<name>.txt``. A run
    that fails does not stop the others. Returns (and writes to ``<out>/sweep.json``) each
    run's exit code, wall time and final scores; runs an earlier call recorded there stay in it.
    """
    out = Path(out)
    order = plan(sweep_file, out, only)  # every run's config, in the file's order, even of runs not in ``only``
    configs = {name: path for name, path in order.items() if only is None or name in only}
    for name in configs:
        if (out / name / checkpoint.CONFIG).exists():
            raise InvalidValue(f"{out / name} already holds a run: choose another --out")
    (out / "logs").mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    waiting, running, summary = list(configs), {}, {}
    start = time.perf_counter()
    while waiting or running:
        while waiting and len(running) < jobs:
            name = waiting.pop(0)
            log = open(out / "logs" / f"{name}.txt", "w", encoding="utf-8")  # closed when the process ends
            command = [sys.executable, "-m", "transformer_lib", "train", "--config", str(configs[name])]
            command += ["--run-dir", str(out / name), "--device", device]
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
            running[name] = (process, log, time.perf_counter())
            print(f"[{time.perf_counter() - start:6.0f} s] started {name}", flush=True)
        time.sleep(poll)
        for name, (process, log, began) in list(running.items()):
            if process.poll() is None:
                continue
            log.close()
            del running[name]
            scores_path = out / name / checkpoint.SCORES
            scores = json.loads(scores_path.read_text(encoding="utf-8")) if scores_path.exists() else None
            seconds = round(time.perf_counter() - began, 1)
            summary[name] = {"returncode": process.returncode, "seconds": seconds, "scores": scores}
            print(f"[{time.perf_counter() - start:6.0f} s] {name} finished: exit {process.returncode}", flush=True)
    record = out / "sweep.json"
    earlier = json.loads(record.read_text(encoding="utf-8")) if record.exists() else {}
    summary = {name: summary.get(name, earlier.get(name)) for name in order if name in summary or name in earlier}
    write_text(record, json.dumps(summary, indent=2) + "\n")
    return {name: summary[name] for name in configs}


def table(summary: dict, split: str = "val") -> str:
    """One line per run: steps, training time and BLEU on ``split`` (both metrics)."""
    lines = [f"{'run':32} {'exit':>4} {'steps':>6} {'train s':>8} {'BLEU tok.lc':>11} {'sacreBLEU':>9}"]
    for name, run in summary.items():
        scores = run["scores"] or {}
        result = scores.get("splits", {}).get(split, {})
        lines.append(
            f"{name:32} {run['returncode']:>4} {scores.get('steps', '-'):>6} {scores.get('train_seconds', '-'):>8} "
            f"{result.get('bleu_tokenized_lowercase', '-'):>11} {result.get('sacrebleu_cased', '-'):>9}"
        )
    return "\n".join(lines)


def pack(folder: str | os.PathLike, archive: str | os.PathLike) -> Path:
    """Write ``folder`` (a sweep's output) to a ``.tar.gz``, without checkpoints; atomically."""
    folder, archive = Path(folder), Path(archive)
    if not folder.is_dir():
        raise MissingFile(f"no folder {folder} to pack")
    left_out = {p for pattern in LEFT_OUT for p in folder.rglob(pattern)}
    archive.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(archive) as tmp, tarfile.open(tmp, "w:gz") as tar:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and path not in left_out:
                tar.add(path, arcname=str(Path(folder.name) / path.relative_to(folder)))
    return archive
