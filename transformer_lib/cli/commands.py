"""The commands' bodies: what ``python -m transformer_lib COMMAND`` does, one ``cmd_*`` function each.

:mod:`transformer_lib.cli` parses the arguments and calls these; a training run's folder, its
resume and its final scoring are here, with the config in :mod:`transformer_lib.training.run_config`
and the loop in :mod:`transformer_lib.training`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import torch

from transformer_lib import checkpoint, metrics, records
from transformer_lib.batching import encode_pairs, example_size, round_up
from transformer_lib.checkpoint import RunRecord
from transformer_lib.config import DecodeConfig, TrainConfig
from transformer_lib.data import load_multi30k, load_pairs
from transformer_lib.errors import Interrupted, InvalidValue, MissingFile
from transformer_lib.files import write_text
from transformer_lib.model import Transformer
from transformer_lib.tokenizer import Tokenizer
from transformer_lib.training import Trainer, device_precision, distributed
from transformer_lib.training.run_config import DataConfig, RunConfig, load_config, resolved_config
from transformer_lib.training.tasks import TranslationTask
from transformer_lib.translation import evaluate_split, load_model, translate_sentences
from transformer_lib.utils import environment, pick_device, seed_everything


def parse_device(name: str) -> torch.device:
    """The --device option: "auto" picks CUDA when there is one; a device that is not here is an error."""
    if name == "auto":
        return pick_device()
    try:
        device = torch.device(name)
    except RuntimeError:
        raise InvalidValue(f"unknown device {name!r}; use auto, cpu, cuda, cuda:N or mps") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise InvalidValue(f"--device {name}: this machine has no CUDA GPU; use --device cpu (or auto)")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise InvalidValue(f"--device {name}: this machine has no Apple GPU; use --device cpu (or auto)")
    return device


# What --resume may change: how long to train and how often to look; never what is trained.
MAY_CHANGE_ON_RESUME = {"epochs", "max_steps", "max_minutes", "eval_every", "checkpoint_every", "progress"}


def _changes(old: RunConfig, new: RunConfig) -> list[str]:
    """The settings of ``new`` that would change the run ``old`` describes."""
    out = []
    for section in ("data", "model", "task", "training"):
        for f in dataclasses.fields(getattr(old, section)):
            before, after = getattr(getattr(old, section), f.name), getattr(getattr(new, section), f.name)
            free = section == "training" and f.name in MAY_CHANGE_ON_RESUME
            if before != after and not free and (section, f.name) != ("model", "vocab_size"):  # data's
                out.append(f"{section}.{f.name} ({before!r} -> {after!r})")
    return out


def _trains_further(old: TrainConfig, new: TrainConfig) -> bool:
    """Whether training config ``new`` goes past where ``old`` stops: more epochs, steps or minutes."""
    if new.epochs > old.epochs:
        return True
    for key in ("max_steps", "max_minutes"):  # None: no limit
        before, after = getattr(old, key), getattr(new, key)
        if before is not None and (after is None or after > before):
            return True
    return False


def _resume_state(run_dir: Path, config: RunConfig, device: torch.device) -> checkpoint.Checkpoint:
    """The checkpoint to continue from, after checking that ``config`` describes the same run and that
    it has training left to do (a finished run resumed as it was would only overwrite its scores)."""
    path = run_dir / checkpoint.CHECKPOINT
    if not path.is_file():
        raise MissingFile(f"--resume: no checkpoint at {path}; leave out --resume to start a run there")
    old = load_config(str(run_dir / checkpoint.CONFIG))
    changed = _changes(old, config)
    if changed:
        raise InvalidValue(
            f"--resume: the config changes {'; '.join(changed)} of the run in {run_dir}; "
            "resume with the run's own config.yaml, or start a new run in another folder"
        )
    if (run_dir / checkpoint.SCORES).exists() and not _trains_further(old.training, config.training):
        raise InvalidValue(
            f"--resume: the run in {run_dir} has finished (its scores.json is written); to train it further, "
            "raise training.max_steps, max_minutes or epochs in a copy of its config.yaml; to score it again: "
            f"python -m transformer_lib evaluate --checkpoint {path}"
        )
    return checkpoint.load_run_checkpoint(path, map_location=device)


def cmd_train(args: argparse.Namespace) -> None:
    """Train from a config; under torchrun, one of several processes (only the main one writes).

    Everything that can fail on the config or the data fails before the run folder is created;
    ``--resume`` continues with the checkpoint's tokenizer and refuses a config that changes the run.
    """
    config = load_config(args.config)
    device = distributed.init(parse_device(args.device))
    precision = device_precision(config.training.precision, device)  # fp16 on a CPU: refused here
    main = distributed.rank() == 0
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    run_dir = Path(distributed.broadcast(str(args.run_dir or Path("runs") / f"{config.name}-{stamp}")))
    state = _resume_state(run_dir, config, device) if args.resume else None
    if state is None and (run_dir / checkpoint.CONFIG).exists():
        raise InvalidValue(f"{run_dir} already holds a run: continue it with --resume, or choose another --run-dir")
    data: DataConfig = config.data
    folder = checkpoint.RunFolder(run_dir, is_main=main)
    seed_everything(config.training.seed)
    env = {**environment(device), "processes": distributed.world_size(), "precision": precision}
    start = time.perf_counter()
    train_pairs = load_pairs("train", data.src, data.tgt)[: data.train_limit]
    val_pairs = load_pairs("val", data.src, data.tgt)
    if state is not None:
        tokenizer = Tokenizer(state.run.tokenizer)  # the run's own vocabulary, never a new one
    elif main:
        tokenizer = Tokenizer.train([s for pair in train_pairs for s in pair], data.vocab_size, data.tokenizer)
    if main:
        train, val = encode_pairs(train_pairs, tokenizer), encode_pairs(val_pairs, tokenizer)
        _check_lengths(train + val, config)
        folder.start(resolved_config(config), env, tokenizer.to_bytes() if state is None else None)
        training = config.training
        folder.note(
            f"run {run_dir} on {env['device']} x {env['processes']}, torch {env['torch']}, "
            f"commit {env['git_commit'][:12]}, precision {precision} (config: {training.precision})",
        )
        if device.type != "cuda" and (training.precision == "bf16" or training.compile):
            folder.note("note: bf16 and compile apply on a CUDA GPU only; this run uses fp32 and eager mode")
    distributed.barrier()  # the other processes read the main one's tokenizer
    if not main:
        if state is None:
            tokenizer = Tokenizer.load(run_dir / checkpoint.TOKENIZER)
        train, val = encode_pairs(train_pairs, tokenizer), encode_pairs(val_pairs, tokenizer)
    task = TranslationTask.from_config(train, val, config.task, config.training.seed)
    model = Transformer(config.model)
    n_params = sum(p.numel() for p in model.parameters())
    if main:
        folder.note(f"{len(train):,} training pairs, vocabulary {tokenizer.vocab_size:,}, {n_params:,} parameters")

    record = RunRecord(data.src, data.tgt, config.model, config.decoding, tokenizer.to_bytes())
    trainer = Trainer(model, task, config.training, run_dir=run_dir, device=device, run=record)
    if state is not None:
        trainer.load_state(state)
        if main:
            folder.note(f"resumed at step {trainer.position.step}")
    trainer.train()
    train_seconds = time.perf_counter() - start
    distributed.finish()
    if not main:
        return  # the main process evaluates and writes the scores
    skipped = f" ({trainer.amp.skipped_steps} skipped by fp16's loss scaling)" if precision == "fp16" else ""
    folder.note(f"trained {trainer.position.step} steps in {train_seconds:.0f} s{skipped}")
    try:
        run = _TrainedRun(folder, config, record, model, tokenizer, trainer, device)
        scores = _score_run(run, start, train_seconds)
        if config.training.snapshot_minutes:
            _score_curve(run, env, scores)
    except KeyboardInterrupt:
        raise Interrupted(
            f"during evaluation; training is complete and saved in {run_dir}: score it with "
            f"python -m transformer_lib evaluate --checkpoint {run_dir}"
        ) from None


def _check_lengths(examples: list, config: RunConfig) -> None:
    """Every pair fits the model's positions and a batch, as batches pad it: checked before anything is written."""
    longest = max(round_up(example_size(e), config.task.pad_multiple) for e in examples)
    for limit, name in ((config.model.max_len, "model.max_len"), (config.task.max_tokens, "task.max_tokens")):
        if longest > limit:
            raise InvalidValue(
                f"the longest sentence pair needs {longest} token positions with this vocabulary, more than "
                f"{name}={limit}: raise {name} to at least {longest}"
            )


def _evaluated(model: Transformer, record: RunRecord) -> checkpoint.Checkpoint:
    """The weights about to be scored, with the run record (the tokenizer too) that ``load_model`` needs."""
    return checkpoint.Checkpoint(model.state_dict(), run=record)


@dataclass
class _TrainedRun:
    """A run just trained, as its scoring sees it: its folder, config, record, model, tokenizer and trainer."""

    folder: checkpoint.RunFolder
    config: RunConfig
    record: RunRecord
    model: Transformer
    tokenizer: Tokenizer
    trainer: Trainer
    device: torch.device

    def evaluate(self):
        """(split, result) for each of the config's evaluation splits, translated with the run's decoding settings."""
        limit = self.config.evaluation.limit
        for split in self.config.evaluation.splits:
            yield split, evaluate_split(self.model, self.tokenizer, self.record, split, self.record.decoding,
                                        self.device, limit)  # fmt: skip


def _score_run(run: _TrainedRun, start: float, train_seconds: float) -> dict:
    """After training: average the last checkpoints if asked, score every evaluation split, write scores.json."""
    evaluation, folder, model, trainer = run.config.evaluation, run.folder, run.model, run.trainer
    scores = {"train_seconds": round(train_seconds, 1), "steps": trainer.position.step, "splits": {}}
    if evaluation.average_last:
        paths = checkpoint.kept_weights(folder.path)[-evaluation.average_last :]
        model.load_state_dict(checkpoint.average_checkpoints(paths))
        scores["averaged"] = [p.name for p in paths]
        scores["averaged_val_loss"] = round(trainer.validate(log=False)["val_loss"], 4)
        folder.save_evaluated(_evaluated(model, run.record))
        folder.note(f"averaged {len(paths)} checkpoints: val loss {scores['averaged_val_loss']}")
    if evaluation.export_half:
        folder.save_evaluated(_evaluated(model, run.record), half=True)
    for split, result in run.evaluate():
        folder.save_hypotheses(split, result.pop("hypotheses"))
        scores["splits"][split] = result
        folder.note(
            f"{split}: BLEU {result['bleu_tokenized_lowercase']} (lowercased, tokenized), "
            f"sacreBLEU {result['sacrebleu_cased']} (cased)",
        )
    scores["wall_seconds"] = round(time.perf_counter() - start, 1)
    folder.save_scores(scores)
    return scores


def _score_curve(run: _TrainedRun, env: dict, scores: dict) -> None:
    """Score each snapshot as the final model was scored; write curve.json: BLEU after so many minutes.

    The last point is the run's own end (scores.json). The record carries the environment, so a
    curve measured on one machine is never mistaken for another's.
    """
    points = []
    for path in checkpoint.snapshots(run.folder.path):
        snapshot = checkpoint.load_checkpoint(path, run.device)
        run.model.load_state_dict(snapshot.weights)
        point = {**dataclasses.asdict(snapshot.snapshot), "splits": {}}
        for split, result in run.evaluate():
            result.pop("hypotheses")
            point["splits"][split] = result
        run.folder.note(f"{path.name} (step {point['step']:,}): " + _bleu_summary(point["splits"]))
        points.append(point)
    training, trainer = run.config.training, run.trainer
    time_up = training.max_minutes and trainer.position.seconds >= 60 * training.max_minutes
    at = trainer.position
    minutes = training.max_minutes if time_up else round(at.seconds / 60, 2)
    end = checkpoint.Snapshot(minutes, at.seconds, at.step, averaged=len(scores.get("averaged", [])))
    end = {**dataclasses.asdict(end), "splits": scores["splits"]}
    curve = {"config": run.config.name, "environment": env, "points": [*points, end]}
    run.folder.save_curve(curve)


def _bleu_summary(splits: dict) -> str:
    return ", ".join(f"{split} sacreBLEU {result['sacrebleu_cased']}" for split, result in splits.items())


def _decoding(args: argparse.Namespace, record: RunRecord) -> DecodeConfig:
    """The run's own decoding settings (as its scores.json used them), with any flag given overriding."""
    flags = {"beam_size": args.beam, "alpha": args.alpha, "batch_size": args.batch_size}
    return dataclasses.replace(record.decoding, **{k: v for k, v in flags.items() if v is not None})


def cmd_evaluate(args: argparse.Namespace) -> None:
    """Score a checkpoint on a split: prints its BLEU scores as JSON; ``--output`` also writes the hypotheses."""
    device = parse_device(args.device)
    model, tokenizer, record = load_model(args.checkpoint, device)
    decoding = _decoding(args, record)
    if args.limit is not None and args.limit < 1:
        raise InvalidValue(f"--limit must be at least 1, got {args.limit}")
    result = evaluate_split(model, tokenizer, record, args.split, decoding, device, args.limit, progress=True)
    hypotheses = result.pop("hypotheses")
    if args.output:
        write_text(args.output, "\n".join(hypotheses) + "\n")
    print(json.dumps(result, indent=2))


def cmd_translate(args: argparse.Namespace) -> None:
    """Translate standard input, one sentence a line, to standard output, one translation a line."""
    device = parse_device(args.device)
    model, tokenizer, record = load_model(args.checkpoint, device)
    decoding = _decoding(args, record)
    sentences = []
    for number, raw in enumerate(sys.stdin.buffer, start=1):
        try:
            sentences.append(raw.decode("utf-8").strip())
        except UnicodeDecodeError:
            raise InvalidValue(
                f"line {number} of the input is not UTF-8 text; convert it first (e.g. iconv -t UTF-8)"
            ) from None
    for line in translate_sentences(model, tokenizer, sentences, decoding, device, progress=sys.stderr.isatty()):
        print(line)


def cmd_score(args: argparse.Namespace) -> None:
    """BLEU of a hypotheses file (one translation a line) against a Multi30k split: no model needed.

    A committed run's file packed into its sweep's ``.tar.gz`` (``results/``) is read from there by its
    old path, as :mod:`transformer_lib.records` reads it: a reader scores it without unpacking.
    """
    path = Path(args.hypotheses)
    if not path.is_file() and records.archive_of(path) is None:
        raise MissingFile(f"no hypotheses file {path}")
    try:
        hypotheses = records.read_text(path).splitlines()
    except UnicodeDecodeError:
        raise InvalidValue(
            f"{path} is not UTF-8 text: give the translations, one a line (e.g. the run's test_2016_flickr.hyp.txt)"
        ) from None
    references = load_multi30k(args.split, args.tgt)
    if len(hypotheses) != len(references):
        raise InvalidValue(
            f"{path} has {len(hypotheses)} lines but {args.split} has {len(references)} sentences: "
            "give one translation per line, in the split's order"
        )
    result = {
        "split": args.split,
        "tgt": args.tgt,
        **metrics.bleu_scores(hypotheses, references),
        "sacrebleu_signature": metrics.sacrebleu_signature(hypotheses, references),
    }
    if args.moses:
        result["bleu_moses_lowercase"] = round(metrics.moses_bleu(hypotheses, references, args.tgt), 2)
    print(json.dumps(result, indent=2))
