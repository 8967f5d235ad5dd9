"""The command line: train, evaluate and translate, with the parts that lessons 9 and 10 build.

    python -m transformer_lib train --config multi30k_de_en_small      # a packaged config, or a path
    python -m transformer_lib evaluate --checkpoint runs/NAME/checkpoint.pt --split test_2016_flickr
    python -m transformer_lib translate --checkpoint runs/NAME/checkpoint.pt < input.txt > output.txt

A training run writes one folder: the resolved config, the environment (versions, device, git
commit), the tokenizer, the metrics over time (``metrics.csv``), a log, the checkpoint, the final
scores (``scores.json``) and the hypotheses of each evaluated split. It needs only PyTorch,
sentencepiece, sacrebleu, tqdm and PyYAML, and runs from a source checkout (``PYTHONPATH=.``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

import torch
import yaml
from tqdm import tqdm

from transformer_lib import distributed
from transformer_lib.batching import encode_pairs, pad_ids
from transformer_lib.data import SPLITS, DataError, load_multi30k, load_pairs
from transformer_lib.decoding import beam_search, greedy_decode
from transformer_lib.errors import InvalidValue, MissingFile
from transformer_lib.metrics import sacrebleu_score, tokenized_bleu
from transformer_lib.model import Transformer, TransformerConfig
from transformer_lib.tasks import TranslationTask
from transformer_lib.tokenizer import Tokenizer
from transformer_lib.training import (
    TrainConfig,
    Trainer,
    average_checkpoints,
    kept_weights,
    load_checkpoint,
    save_atomically,
)
from transformer_lib.utils import pick_device, seed_everything

CONFIG_DIR = Path(__file__).parent / "configs"


@dataclasses.dataclass(frozen=True)
class DataConfig:
    src: str = "de"
    tgt: str = "en"
    vocab_size: int = 8000
    tokenizer: str = "bpe"  # or "unigram"
    train_limit: int | None = None  # use only the first N training pairs (smoke tests)


@dataclasses.dataclass(frozen=True)
class TaskConfig:
    """What a training batch is and what its loss is: the :class:`TranslationTask`'s settings."""

    max_tokens: int = 4096  # token slots per batch and process, padding included (the paper: ~25,000 a side)
    label_smoothing: float = 0.1


@dataclasses.dataclass(frozen=True)
class DecodeConfig:
    beam_size: int = 4  # 1: greedy
    alpha: float = 0.6  # length penalty
    max_extra: int = 50  # output length limit: source length + max_extra
    batch_size: int = 128  # sentences decoded together

    def __post_init__(self) -> None:
        if self.beam_size < 1 or self.batch_size < 1 or self.max_extra < 1:
            raise InvalidValue("decoding: beam_size, batch_size and max_extra must be positive integers")


@dataclasses.dataclass(frozen=True)
class EvalConfig:
    splits: tuple[str, ...] = ("val", "test_2016_flickr", "test_2017_flickr", "test_2017_mscoco")
    limit: int | None = None  # evaluate only the first N sentences of each split
    average_last: int = 0  # evaluate the mean of the last N kept checkpoints (needs training.keep_last >= N)


SECTIONS = {
    "data": DataConfig,
    "model": None,
    "task": TaskConfig,
    "training": TrainConfig,
    "decoding": DecodeConfig,
    "evaluation": EvalConfig,
}


def _build(cls: type, section: str, values: dict):
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - fields)
    if unknown:
        raise InvalidValue(f"unknown key(s) {unknown} in section '{section}'; allowed: {sorted(fields)}")
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    try:
        return cls(**values)
    except TypeError as exc:
        raise InvalidValue(f"section '{section}': {exc}") from exc


def load_config(name_or_path: str) -> dict:
    """Read a YAML run config (a path, or the name of one in transformer_lib/configs) and check it."""
    path = Path(name_or_path)
    if not path.is_file():
        path = CONFIG_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))
        raise MissingFile(f"no config file {name_or_path!r}; give a path or one of {known}")
    raw = yaml.safe_load(path.read_text()) or {}
    unknown = sorted(set(raw) - set(SECTIONS))
    if unknown:
        raise InvalidValue(f"unknown section(s) {unknown} in {path}; allowed: {list(SECTIONS)}")
    config = {"name": path.stem, "raw": raw}
    for section, cls in SECTIONS.items():
        if cls is not None:
            config[section] = _build(cls, section, raw.get(section) or {})
    data = config["data"]
    model = dict(raw.get("model") or {})
    preset = model.pop("preset", "base")
    allowed = {f.name for f in dataclasses.fields(TransformerConfig)} - {"vocab_size"}
    unknown = sorted(set(model) - allowed)
    if unknown:
        raise InvalidValue(f"unknown key(s) {unknown} in section 'model'; allowed: preset and {sorted(allowed)}")
    config["model"] = TransformerConfig.preset(preset, vocab_size=data.vocab_size, **model)
    if config["evaluation"].average_last > config["training"].keep_last:
        raise InvalidValue(
            f"evaluation.average_last={config['evaluation'].average_last} needs training.keep_last >= it, "
            f"got keep_last={config['training'].keep_last}"
        )
    for split in config["evaluation"].splits:
        if split not in SPLITS:
            raise InvalidValue(f"evaluation: unknown split {split!r}; choose from {list(SPLITS)}")
    return config


def resolved_config(config: dict) -> dict:
    """The config with every default filled in, as YAML-ready values: ``train --config`` on it repeats the run."""

    def plain(obj) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(obj).items()}

    out = {section: plain(config[section]) for section in SECTIONS}
    out["model"].pop("vocab_size")  # set by data.vocab_size
    return out


def environment(device: torch.device) -> dict:
    """What a result depends on: versions, device and the git commit of the code."""
    repo = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        try:
            out = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=10)
            return out.stdout.strip() if out.returncode == 0 else "unknown"
        except (OSError, subprocess.SubprocessError):
            return "unknown"

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({platform.machine()})",
        "cpu_threads": torch.get_num_threads(),
        "git_commit": git("rev-parse", "HEAD"),
        "git_dirty": git("status", "--porcelain", "--untracked-files=no") not in ("", "unknown"),
        "started_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def translate_sentences(
    model: Transformer,
    tokenizer: Tokenizer,
    sentences: Sequence[str],
    decoding: DecodeConfig,
    device: torch.device,
    progress: bool = False,
) -> list[str]:
    """Translate plain sentences, in batches of similar length, keeping their order.

    ``progress`` shows a bar of sentences translated (on standard error).
    """
    model.eval()
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    out: list[str] = [""] * len(sentences)
    bar = tqdm(total=len(sentences), desc="translate", unit="sent", disable=not progress, mininterval=1.0)
    for start in range(0, len(order), decoding.batch_size):
        chunk = order[start : start + decoding.batch_size]
        ids = tokenizer.encode_batch([sentences[i] for i in chunk], eos=True)
        src = pad_ids(ids).to(device)
        if decoding.beam_size == 1:
            hyps = greedy_decode(model, src, decoding.max_extra)
        else:
            hyps = beam_search(model, src, decoding.beam_size, decoding.alpha, decoding.max_extra)
        for i, hyp in zip(chunk, hyps, strict=True):
            out[i] = tokenizer.decode(hyp)
        bar.update(len(chunk))
    bar.close()
    return out


def evaluate_split(
    model, tokenizer, meta: dict, split: str, decoding: DecodeConfig, device, limit=None, progress: bool = False
) -> dict:
    """BLEU of the model on one split; returns the scores and the hypotheses."""
    sources = load_multi30k(split, meta["src"])[:limit]
    references = load_multi30k(split, meta["tgt"])[:limit]
    start = time.perf_counter()
    hypotheses = translate_sentences(model, tokenizer, sources, decoding, device, progress)
    return {
        "split": split,
        "sentences": len(sources),
        "bleu_tokenized_lowercase": round(tokenized_bleu(hypotheses, references), 2),
        "sacrebleu_cased": round(sacrebleu_score(hypotheses, references), 2),
        "decoding": dataclasses.asdict(decoding),
        "seconds": round(time.perf_counter() - start, 1),
        "hypotheses": hypotheses,
    }


def load_model(checkpoint: str | Path, device: torch.device) -> tuple[Transformer, Tokenizer, dict]:
    """The model, tokenizer and run metadata stored in a checkpoint written by ``train``."""
    state = load_checkpoint(checkpoint, map_location=device)
    if "tokenizer" not in state:
        raise InvalidValue(f"{checkpoint} has no tokenizer: it was not written by 'python -m transformer_lib train'")
    model = Transformer(TransformerConfig(**state["model_config"])).to(device)
    model.load_state_dict(state["model"])
    return model.eval(), Tokenizer(state["tokenizer"]), state["meta"]


def _device(name: str) -> torch.device:
    """The --device option: "auto" picks CUDA when there is one."""
    return pick_device() if name == "auto" else torch.device(name)


def _log(run_dir: Path, message: str) -> None:
    print(message, file=sys.stderr, flush=True)
    with open(run_dir / "log.txt", "a") as f:
        f.write(message + "\n")


def cmd_train(args: argparse.Namespace) -> None:
    """Train from a config; under torchrun, one of several processes (only the main one writes)."""
    config = load_config(args.config)
    device = distributed.init(_device(args.device))
    main = distributed.rank() == 0
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    run_dir = Path(distributed.broadcast(str(args.run_dir or Path("runs") / f"{config['name']}-{stamp}")))
    data: DataConfig = config["data"]
    seed_everything(config["training"].seed)
    env = {**environment(device), "processes": distributed.world_size()}
    start = time.perf_counter()
    train_pairs = load_pairs("train", data.src, data.tgt)[: data.train_limit]
    if main:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.yaml").write_text(yaml.safe_dump(resolved_config(config), sort_keys=False))
        (run_dir / "environment.json").write_text(json.dumps(env, indent=2) + "\n")
        _log(
            run_dir,
            f"run {run_dir} on {env['device']} x {env['processes']}, torch {env['torch']}, "
            f"commit {env['git_commit'][:12]}",
        )
        tokenizer = Tokenizer.train([s for pair in train_pairs for s in pair], data.vocab_size, data.tokenizer)
        tokenizer.save(run_dir / "tokenizer.model")
    distributed.barrier()  # the other processes read the main one's tokenizer
    if not main:
        tokenizer = Tokenizer.load(run_dir / "tokenizer.model")
    train = encode_pairs(train_pairs, tokenizer)
    val = encode_pairs(load_pairs("val", data.src, data.tgt), tokenizer)
    task_config: TaskConfig = config["task"]
    task = TranslationTask(train, val, task_config.max_tokens, task_config.label_smoothing, config["training"].seed)
    model = Transformer(config["model"])
    n_params = sum(p.numel() for p in model.parameters())
    if main:
        _log(run_dir, f"{len(train):,} training pairs, vocabulary {tokenizer.vocab_size:,}, {n_params:,} parameters")

    trainer = Trainer(model, task, config["training"], run_dir=run_dir, device=device)
    trainer.extra_state = {"tokenizer": tokenizer.to_bytes(), "meta": {"src": data.src, "tgt": data.tgt}}
    if args.resume:
        trainer.load_state(load_checkpoint(run_dir / "checkpoint.pt", map_location=device))
        if main:
            _log(run_dir, f"resumed at step {trainer.step}")
    trainer.train()
    train_seconds = time.perf_counter() - start
    distributed.finish()
    if not main:
        return  # the main process evaluates and writes the scores
    _log(run_dir, f"trained {trainer.step} steps in {train_seconds:.0f} s")

    scores = {"train_seconds": round(train_seconds, 1), "steps": trainer.step, "splits": {}}
    if config["evaluation"].average_last:
        paths = kept_weights(run_dir)[-config["evaluation"].average_last :]
        model.load_state_dict(average_checkpoints(paths))
        scores["averaged"] = [p.name for p in paths]
        scores["averaged_val_loss"] = round(trainer.validate(log=False)["val_loss"], 4)
        save_atomically(
            {"model": model.state_dict(), "model_config": dataclasses.asdict(model.config), **trainer.extra_state},
            run_dir / "checkpoint_averaged.pt",
        )
        _log(run_dir, f"averaged {len(paths)} checkpoints: val loss {scores['averaged_val_loss']}")
    for split in config["evaluation"].splits:
        result = evaluate_split(
            model,
            tokenizer,
            {"src": data.src, "tgt": data.tgt},
            split,
            config["decoding"],
            device,
            config["evaluation"].limit,
        )
        (run_dir / f"{split}.hyp.txt").write_text("\n".join(result.pop("hypotheses")) + "\n")
        scores["splits"][split] = result
        _log(
            run_dir,
            f"{split}: BLEU {result['bleu_tokenized_lowercase']} (lowercased, tokenized), "
            f"sacreBLEU {result['sacrebleu_cased']} (cased)",
        )
    scores["wall_seconds"] = round(time.perf_counter() - start, 1)
    (run_dir / "scores.json").write_text(json.dumps(scores, indent=2) + "\n")


def cmd_evaluate(args: argparse.Namespace) -> None:
    device = _device(args.device)
    model, tokenizer, meta = load_model(args.checkpoint, device)
    decoding = DecodeConfig(beam_size=args.beam, alpha=args.alpha, batch_size=args.batch_size)
    result = evaluate_split(model, tokenizer, meta, args.split, decoding, device, args.limit, progress=True)
    hypotheses = result.pop("hypotheses")
    if args.output:
        Path(args.output).write_text("\n".join(hypotheses) + "\n")
    print(json.dumps(result, indent=2))


def cmd_translate(args: argparse.Namespace) -> None:
    device = _device(args.device)
    model, tokenizer, _ = load_model(args.checkpoint, device)
    decoding = DecodeConfig(beam_size=args.beam, alpha=args.alpha, batch_size=args.batch_size)
    sentences = [line.strip() for line in sys.stdin]
    for line in translate_sentences(model, tokenizer, sentences, decoding, device, progress=sys.stderr.isatty()):
        print(line)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m transformer_lib", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="train a model from a YAML config")
    train.add_argument("--config", required=True, help="a YAML file, or the name of a packaged config")
    train.add_argument("--run-dir", help="output folder (default: runs/<config>-<time>)")
    train.add_argument("--resume", action="store_true", help="continue from the run folder's checkpoint")
    for name, helptext in (("evaluate", "BLEU on a Multi30k split"), ("translate", "translate stdin to stdout")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("--checkpoint", required=True)
        defaults = DecodeConfig()  # one source for the defaults: the config's
        p.add_argument("--beam", type=int, default=defaults.beam_size, help="beam size (1: greedy)")
        p.add_argument("--alpha", type=float, default=defaults.alpha, help="length penalty")
        p.add_argument("--batch-size", type=int, default=defaults.batch_size, help="sentences decoded together")
        if name == "evaluate":
            p.add_argument("--split", default="test_2016_flickr", choices=list(SPLITS))
            p.add_argument("--limit", type=int, help="only the first N sentences")
            p.add_argument("--output", help="write the hypotheses to this file")
    for p in sub.choices.values():
        p.add_argument("--device", default="auto", help="cpu, cuda, or auto (default)")
    args = parser.parse_args(argv)
    try:
        {"train": cmd_train, "evaluate": cmd_evaluate, "translate": cmd_translate}[args.command](args)
    except (ValueError, FileNotFoundError, DataError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
