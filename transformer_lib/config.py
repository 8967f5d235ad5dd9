"""Every setting of the package as a plain dataclass, and the special token ids: the bottom floor.

The model's (:class:`TransformerConfig`), a layer's (:class:`LayerConfig`), decoding's
(:class:`DecodeConfig`), a translation task's (:class:`TaskConfig`) and training's
(:class:`TrainConfig`) settings, each with its defaults and its checks. This module imports
nothing of the package but its errors, so a checkpoint, the run config and the command line read
a config without importing the model, beam search or the training loop. The names a config may
take (activations, positional encodings, precisions, schedules) live here too; the modules that
implement them key their tables on these names.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from transformer_lib.errors import InvalidValue, check_fields, check_range

PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3  # every tokenizer of the package reserves these ids (lesson 2)
SPECIAL_TOKENS: dict[str, int] = {"<pad>": PAD_ID, "<bos>": BOS_ID, "<eos>": EOS_ID, "<unk>": UNK_ID}
"""Each special piece and its id, in id order: padding, begin and end of sentence, unknown."""

ACTIVATIONS = ("relu", "gelu")  # the feed-forward network's (layers.py)
POSITIONALS = ("sinusoidal", "learned", "rotary")  # how positions enter (embeddings.py)
PRECISIONS = ("auto", "bf16", "fp16", "fp32")  # training's number formats (training/precision.py)
SCHEDULES = ("noam", "time_linear", "cooldown")  # learning-rate schedules (training/schedules.py)
MAX_EXTRA = 25  # the default output length limit: source length + MAX_EXTRA tokens (decoding.py says why)

# Sizes of the paper's Table 3 (base, big) and two smaller ones: tiny (what lessons 9, 10 and 12 train on a
# CPU) and small (the multi30k_*_small configs).
PRESETS: dict[str, dict] = {
    "base": dict(d_model=512, n_heads=8, n_layers=6, d_ff=2048, dropout=0.1),
    "big": dict(d_model=1024, n_heads=16, n_layers=6, d_ff=4096, dropout=0.3),
    "small": dict(d_model=256, n_heads=4, n_layers=3, d_ff=1024, dropout=0.1),
    "tiny": dict(d_model=64, n_heads=4, n_layers=2, d_ff=256, dropout=0.0),
}


def check_heads(d_model: int, n_heads: int, n_kv_heads: int | None = None, why: str = ": heads split d_model") -> int:
    """The number of key-value heads, once ``d_model``, ``n_heads`` and ``n_kv_heads`` (None: ``n_heads``)
    are known to split into heads; else one clear error, which ``why`` ends. The one place of these
    rules: every layer and config that has heads checks them here."""
    n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
    for name, value in (("d_model", d_model), ("n_heads", n_heads), ("n_kv_heads", n_kv_heads)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InvalidValue(f"{name} must be a positive integer, got {value!r}")
    if d_model % n_heads:
        raise InvalidValue(f"d_model={d_model} must be divisible by n_heads={n_heads}{why}")
    if n_heads % n_kv_heads:
        raise InvalidValue(
            f"n_heads={n_heads} must be divisible by n_kv_heads={n_kv_heads}: each key-value head serves a group "
            "of query heads"
        )
    return n_kv_heads


def check_name(field: str, value: object, names: tuple[str, ...]) -> None:
    """One clear error unless ``value`` is one of ``names``."""
    if value not in names:
        raise InvalidValue(f"{field} must be one of {list(names)}, got {value!r}")


@dataclass(frozen=True)
class LayerConfig:
    """Every setting of an encoder or decoder layer, checked here once for both (and for every stack)."""

    d_model: int
    n_heads: int
    d_ff: int
    dropout: float = 0.0  # on every sub-layer's output
    attention_dropout: float = 0.0  # on the attention weights
    activation: str = "relu"
    norm_first: bool = False  # False: post-norm, as in the paper
    rotary: bool = False  # rotate self-attention's queries and keys by their positions
    n_kv_heads: int | None = None  # key-value heads (grouped-query attention); None: n_heads

    def __post_init__(self) -> None:
        check_heads(self.d_model, self.n_heads, self.n_kv_heads, why=" (the paper: 512 / 8 = 64)")
        check_name("activation", self.activation, ACTIVATIONS)
        for name in ("dropout", "attention_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise InvalidValue(f"{name} must be in [0, 1), got {getattr(self, name)!r}")


@dataclass(frozen=True)
class TransformerConfig:
    """Every size and switch of a :class:`~transformer_lib.model.Transformer`. Defaults are the paper's base model.

    ``tie_embeddings`` shares one matrix between the source embedding, the target embedding and
    the output projection (section 3.4), which needs one vocabulary for both languages.
    Padding is always ``PAD_ID`` (the tokenizer's, one source of truth for every module).
    """

    vocab_size: int
    d_model: int = 512
    n_heads: int = 8
    n_kv_heads: int | None = None  # key-value heads (grouped-query attention, lesson 12); None: n_heads
    n_layers: int = 6  # encoder layers, and as many decoder layers
    d_ff: int = 2048
    dropout: float = 0.1  # on embeddings + positions and on every sub-layer's output
    attention_dropout: float = 0.0  # on attention weights (not in the paper; tensor2tensor has it)
    max_len: int = 1024
    norm_first: bool = False  # False: post-norm, as in the paper
    activation: str = "relu"
    positional: str = "sinusoidal"  # or "learned", or "rotary" (rotated queries and keys, not added)
    tie_embeddings: bool = True

    def __post_init__(self) -> None:
        check_fields(self)
        for name in ("vocab_size", "d_model", "n_heads", "n_layers", "d_ff", "max_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise InvalidValue(f"{name} must be a positive integer, got {value!r}")
        _ = self.layer  # LayerConfig checks the heads, the dropouts and the activation, once for every layer
        check_name("positional", self.positional, POSITIONALS)
        if self.positional == "sinusoidal" and self.d_model % 2:
            raise InvalidValue(
                f"sinusoidal positions pair sines with cosines: d_model must be even, got {self.d_model}"
            )
        if self.positional == "rotary" and (self.d_model // self.n_heads) % 2:
            raise InvalidValue(
                f"rotary positions rotate pairs of features: d_model / n_heads must be even, "
                f"got {self.d_model} / {self.n_heads}"
            )

    @classmethod
    def preset(cls, name: str, vocab_size: int, **overrides) -> TransformerConfig:
        """A named size (``base``, ``big``, ``small``, ``tiny``), with any field overridden."""
        if not isinstance(name, str) or name not in PRESETS:
            raise InvalidValue(f"unknown preset {name!r}; choose one of {list(PRESETS)}")
        return cls(vocab_size=vocab_size, **{**PRESETS[name], **overrides})

    def replace(self, **changes) -> TransformerConfig:
        return dataclasses.replace(self, **changes)

    @property
    def layer(self) -> LayerConfig:
        """What every layer of the model's stacks is built from (encoder, decoder, lesson 13's variants)."""
        return LayerConfig(
            d_model=self.d_model,
            n_heads=self.n_heads,
            d_ff=self.d_ff,
            dropout=self.dropout,
            attention_dropout=self.attention_dropout,
            activation=self.activation,
            norm_first=self.norm_first,
            rotary=self.positional == "rotary",
            n_kv_heads=self.n_kv_heads,
        )


@dataclass(frozen=True)
class DecodeConfig:
    """How to translate: beam search (or greedy) and its limits. The command line's defaults too."""

    beam_size: int = 4  # 1: greedy
    alpha: float = 0.6  # length penalty
    max_extra: int = MAX_EXTRA  # output length limit: source length + max_extra
    batch_size: int = 128  # sentences decoded together
    cuda_graph: bool = False  # on a GPU, replay each cached step as a CUDA graph (StaticStep)

    def __post_init__(self) -> None:
        check_fields(self)
        for name in ("beam_size", "max_extra", "batch_size"):
            check_range(self, name, 1)
        check_range(self, "alpha", 0)


@dataclass(frozen=True)
class TaskConfig:
    """What a translation batch is and what its loss is: the settings of
    :class:`~transformer_lib.training.tasks.TranslationTask`, and the run config's ``task`` section."""

    max_tokens: int = 4096  # token slots per batch and process, padding included (the paper: ~25,000 a side)
    label_smoothing: float = 0.1
    pad_multiple: int = 1  # pad lengths up to a multiple of this (8: few batch shapes, for a GPU)

    def __post_init__(self) -> None:
        check_fields(self)
        for name in ("max_tokens", "pad_multiple"):
            if getattr(self, name) < 1:
                raise InvalidValue(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        check_range(self, "label_smoothing", 0, 1, closed_high=False)


@dataclass(frozen=True)
class TrainConfig:
    """How to train, whatever the model. Defaults follow the paper where it applies to a small corpus.

    What a batch is and how the loss is computed (the batch budget, label smoothing) belong to
    the task (:class:`TaskConfig`).
    """

    epochs: int = 10
    max_steps: int | None = None  # stop earlier than ``epochs`` if set
    max_minutes: float | None = None  # also stop after this much training time (a sweep's budget on a GPU)
    snapshot_minutes: tuple[float, ...] = ()  # also save the model at these minutes of training: a curve
    lr_factor: float = 1.0  # multiplies the paper's schedule
    warmup: int = 4000
    schedule: str = "noam"  # noam: the paper's; time_linear: its warm-up times a line to 0 at max_minutes;
    # cooldown: the paper's, falling in a line to 0 over the last `cooldown` of max_minutes (or max_steps)
    cooldown: float = 0.2
    betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    weight_decay: float = 0.0
    clip_grad: float | None = 1.0
    grad_accum: int = 1  # batches per optimizer step (per process, when there are several)
    precision: str = "fp32"  # auto | bf16 | fp16 | fp32: see training.precision.resolve_precision
    compile: bool = False  # torch.compile the model; only on CUDA, a no-op on CPU
    # Training steps as CUDA graphs (torch.compile's reduce-overhead mode): each batch shape's kernels
    # recorded once, then replayed without launching each. Pays when shapes recur: set task.pad_multiple.
    cuda_graphs: bool = False
    eval_every: int = 0  # steps between validations; 0: at the end of each epoch
    checkpoint_every: int = 0  # steps between checkpoints; 0: at the end of each epoch
    keep_last: int = 0  # also keep the weights of the last N checkpoints, for averaging (weights-step*.pt)
    seed: int = 0
    progress: bool = True  # the tqdm progress bar

    def __post_init__(self) -> None:
        check_fields(self)
        for name in ("epochs", "warmup", "grad_accum", "max_steps"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise InvalidValue(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        for name in ("keep_last", "eval_every", "checkpoint_every", "adam_eps", "weight_decay", "max_minutes"):
            check_range(self, name, 0)
        for name in ("lr_factor", "clip_grad"):  # a negative clip would train by gradient ascent
            if getattr(self, name) is not None and getattr(self, name) <= 0:
                raise InvalidValue(f"{name} must be positive, got {getattr(self, name)!r}")
        if not all(0.0 <= b < 1.0 for b in self.betas):
            raise InvalidValue(f"betas must be two numbers in [0, 1), got {self.betas!r}")
        marks = self.snapshot_minutes
        if any(not isinstance(m, int | float) or m <= 0 for m in marks) or list(marks) != sorted(set(marks)):
            raise InvalidValue(f"snapshot_minutes must be positive minutes in increasing order, got {list(marks)!r}")
        if marks and self.max_minutes and marks[-1] >= self.max_minutes:
            raise InvalidValue(
                f"snapshot_minutes must end before max_minutes={self.max_minutes} (the run's end is the last point), "
                f"got {list(marks)!r}"
            )
        check_name("schedule", self.schedule, SCHEDULES)
        if self.schedule == "time_linear" and not self.max_minutes:
            raise InvalidValue("schedule time_linear falls to 0 at max_minutes: set training.max_minutes too")
        if self.schedule == "cooldown" and not (self.max_minutes or self.max_steps):
            raise InvalidValue("schedule cooldown falls to 0 at the run's end: set training.max_minutes or max_steps")
        if not 0.0 < self.cooldown <= 1.0:
            raise InvalidValue(f"cooldown must be a share of the run in (0, 1], got {self.cooldown!r}")
        check_name("precision", self.precision, PRECISIONS)
