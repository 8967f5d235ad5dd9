"""A training run's configuration: six sections of YAML, each a dataclass, checked before anything runs.

The sections::

    data:       DataConfig     languages, vocabulary
    model:      a preset name and any field of TransformerConfig
    task:       TaskConfig     the token budget of a batch, label smoothing
    training:   TrainConfig    the loop: epochs, schedule, accumulation, checkpoints
    decoding:   DecodeConfig   beam size, length penalty
    evaluation: EvalConfig     splits to score, checkpoint averaging

:func:`load_config` returns a :class:`RunConfig`, one field per section. Every default lives in
its dataclass (the command line's flags take theirs from here), and :func:`resolved_config` writes
a config with all of them filled in, so that a run folder's ``config.yaml`` repeats the run. The
packaged configs are YAML files in ``transformer_lib/configs/``. It sits with training, below the
command line, so that the benchmarks read a recipe as ``train`` does.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import yaml

from transformer_lib.config import DecodeConfig, TaskConfig, TrainConfig, TransformerConfig
from transformer_lib.data import LANGUAGES, SPLITS
from transformer_lib.errors import InvalidValue, MissingFile, check_fields, check_range

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"  # data files, not a module


class _Loader(yaml.SafeLoader):
    """PyYAML reads YAML 1.1, where ``1e-9`` (no dot) is a string; this loader reads it as YAML 1.2 does, a float."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """Which corpus and vocabulary: Multi30k's ``src`` to ``tgt``, one SentencePiece model for both."""

    src: str = "de"
    tgt: str = "en"
    vocab_size: int = 8000
    tokenizer: str = "bpe"  # or "unigram"
    train_limit: int | None = None  # use only the first N training pairs (smoke tests)

    def __post_init__(self) -> None:
        check_fields(self)
        for name in ("src", "tgt"):
            if getattr(self, name) not in LANGUAGES:
                raise InvalidValue(f"{name} must be one of {list(LANGUAGES)}, got {getattr(self, name)!r}")
        if self.src == self.tgt:
            raise InvalidValue(f"src and tgt must be two languages, got {self.src!r} twice")
        if self.tokenizer not in ("bpe", "unigram"):
            raise InvalidValue(f"tokenizer must be 'bpe' or 'unigram', got {self.tokenizer!r}")
        check_range(self, "vocab_size", 5)
        check_range(self, "train_limit", 1)


@dataclasses.dataclass(frozen=True)
class EvalConfig:
    """What to score at the end of a run."""

    splits: tuple[str, ...] = ("val", "test_2016_flickr", "test_2017_flickr", "test_2017_mscoco")
    limit: int | None = None  # evaluate only the first N sentences of each split
    average_last: int = 0  # evaluate the mean of the last N kept checkpoints (needs training.keep_last >= N)
    export_half: bool = False  # also save the evaluated weights in half precision (model_fp16.pt)

    def __post_init__(self) -> None:
        check_fields(self)
        check_range(self, "limit", 1)
        check_range(self, "average_last", 0)
        for split in self.splits:
            if split not in SPLITS:
                raise InvalidValue(f"unknown split {split!r} in splits; choose from {list(SPLITS)}")


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """A whole training run, as its YAML file says: one checked dataclass per section, and its name.

    The checks that span two sections are here; each section checks its own fields.
    """

    name: str  # the file's name without .yaml: a run folder's prefix
    data: DataConfig
    model: TransformerConfig
    task: TaskConfig
    training: TrainConfig
    decoding: DecodeConfig
    evaluation: EvalConfig

    def __post_init__(self) -> None:
        training, evaluation = self.training, self.evaluation
        if evaluation.average_last > training.keep_last:
            raise InvalidValue(
                f"evaluation.average_last={evaluation.average_last} needs training.keep_last >= it, "
                f"got keep_last={training.keep_last}"
            )
        if training.snapshot_minutes and evaluation.average_last not in (0, training.keep_last):
            raise InvalidValue(
                f"training.snapshot_minutes: a snapshot averages all training.keep_last={training.keep_last} kept "
                f"checkpoints; set evaluation.average_last to {training.keep_last} too, so every point of the curve "
                f"is scored alike (got {evaluation.average_last})"
            )


SECTIONS = {
    "data": DataConfig,
    "model": None,
    "task": TaskConfig,
    "training": TrainConfig,
    "decoding": DecodeConfig,
    "evaluation": EvalConfig,
}


def _legacy_bf16(values: dict) -> dict:
    """``training.bf16``, before ``precision`` replaced it: true reads as bf16, false as fp32.

    Configs and the run folders of earlier runs (results/) still say it.
    """
    if "bf16" not in values:
        return values
    if "precision" in values:
        raise InvalidValue(
            "section 'training': give precision only (bf16 is its old name; bf16: true = precision: bf16)"
        )
    values = dict(values)
    bf16 = values.pop("bf16")
    if not isinstance(bf16, bool):
        raise InvalidValue(f"section 'training': bf16 must be true or false, got {bf16!r} (better: precision: auto)")
    return {**values, "precision": "bf16" if bf16 else "fp32"}


def _build(cls: type, section: str, values: dict):
    if cls is TrainConfig:
        values = _legacy_bf16(values)
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - fields)
    if unknown:
        raise InvalidValue(f"unknown key(s) {unknown} in section '{section}'; allowed: {sorted(fields)}")
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    try:
        return cls(**values)
    except InvalidValue as exc:
        raise InvalidValue(f"section '{section}': {exc}") from None


def config_path(name_or_path: str | Path) -> Path:
    """The file of a run config: a path, or the name of a packaged one in transformer_lib/configs."""
    path = Path(name_or_path)
    if not path.is_file():
        path = CONFIG_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))
        raise MissingFile(f"no config file {str(name_or_path)!r}; give a path or one of {known}")
    return path


def read_yaml(path: Path) -> object:
    """A YAML file's content, with YAML 1.2's floats (``1e-9``); one clear line if it is not YAML."""
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
        raise InvalidValue(f"{path} is not valid YAML{at}: fix the file (a YAML mapping)") from None


def load_config(name_or_path: str) -> RunConfig:
    """Read a YAML run config (a path, or the name of one in transformer_lib/configs) and check it."""
    path = config_path(name_or_path)
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise InvalidValue(f"{path} must hold a mapping of sections {list(SECTIONS)}, got a {type(raw).__name__}")
    for section, values in raw.items():
        if values is not None and not isinstance(values, dict):
            raise InvalidValue(f"section '{section}' in {path} must be a mapping of keys, got {values!r}")
    unknown = sorted(set(raw) - set(SECTIONS))
    if unknown:
        raise InvalidValue(f"unknown section(s) {unknown} in {path}; allowed: {list(SECTIONS)}")
    sections = {section: _build(cls, section, raw.get(section) or {}) for section, cls in SECTIONS.items() if cls}
    model = dict(raw.get("model") or {})
    preset = model.pop("preset", "base")
    allowed = {f.name for f in dataclasses.fields(TransformerConfig)} - {"vocab_size"}
    unknown = sorted(set(model) - allowed)
    if unknown:
        raise InvalidValue(f"unknown key(s) {unknown} in section 'model'; allowed: preset and {sorted(allowed)}")
    try:
        sections["model"] = TransformerConfig.preset(preset, vocab_size=sections["data"].vocab_size, **model)
    except InvalidValue as exc:
        raise InvalidValue(f"section 'model': {exc}") from None
    return RunConfig(name=path.stem, **sections)


def resolved_config(config: RunConfig) -> dict:
    """The config with every default filled in, as YAML-ready values: ``train --config`` on it repeats the run."""

    def plain(obj) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(obj).items()}

    out = {section: plain(getattr(config, section)) for section in SECTIONS}
    out["model"].pop("vocab_size")  # set by data.vocab_size
    return out
