"""transformer_lib: the Transformer of "Attention Is All You Need", built lesson by lesson.

Each lesson of the book adds the final version of its component here; later lessons import
it instead of writing it again. The folders follow the book:

* the top level, one module per concept: every setting as a plain dataclass and the special
  token ids (``config``); the Transformer that lessons 2 to 10 build (``tokenizer``, ``data``,
  ``embeddings``, ``attention`` (with its cache), ``layers``, ``model``, ``batching``,
  ``checkpoint``, ``decoding``, ``metrics``) and a trained run in use (``translation``), PyTorch's
  modules as independent references (``reference``), and what they all share (``errors``,
  ``files``, ``versions``, ``utils``);
* ``training/``: lesson 9's loop and its parts: the tasks, the schedules, the precision, the
  update, the progress bar, the resume state, several processes and a run's YAML config (the
  packaged configs are in ``configs/``; a run's folder is ``checkpoint``'s);
* ``family/``: lesson 13's BERT, GPT and Vision Transformer, built from the same layers;
* ``cli/``: training runs from the command line (lesson 11): train, evaluate, translate, score;
* ``coursework/``: the exercises' checks, the quizzes, and the helpers the assignments' tests use;
* ``benchmarks/``: the measurements lessons 10 and 12 and the appendix run.

``from transformer_lib import X`` gives every name in ``__all__``, wherever it lives. The book's own
tools (grading the assignments, the website's export and server, sweeps, the other benchmarks) are
another package, ``book_tools``, in the repository's ``tools/`` folder: it imports this one, never
the other way round.
"""

import os

__version__ = "0.3.0"  # the one place it is written: pyproject.toml, the CLI's --version and the book read it

# OpenMP threads that spin while they wait steal the cores of anything else running (a second
# notebook, a test worker): wait passively unless the reader chose otherwise. It must be set
# before PyTorch loads its OpenMP runtime, so here, before the first import of torch.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# Importing it checks the Python and PyTorch: one line naming the version needed, before anything fails.
from transformer_lib import versions  # noqa: F401
from transformer_lib.attention import (
    AttentionCache,
    KVCache,
    LayerCache,
    MultiHeadAttention,
    StaticKVCache,
    causal_mask,
    keep_attention_weights,
    padding_mask,
    scaled_dot_product_attention,
    sliding_window_mask,
    tiled_attention,
)
from transformer_lib.batching import (
    Batch,
    collate,
    encode_pairs,
    example_size,
    pad_ids,
    padding_fraction,
    token_batches,
)
from transformer_lib.checkpoint import average_checkpoints, load_checkpoint
from transformer_lib.config import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    PRESETS,
    SPECIAL_TOKENS,
    UNK_ID,
    TaskConfig,
    TrainConfig,
    TransformerConfig,
)
from transformer_lib.data import LANGUAGES, SPLITS, DataError, load_multi30k, load_pairs
from transformer_lib.decoding import beam_search, greedy_decode, sample
from transformer_lib.embeddings import (
    LearnedPositionalEncoding,
    SinusoidalPositionalEncoding,
    TokenEmbedding,
    alibi_bias,
    alibi_slopes,
    apply_rotary,
    sinusoidal_table,
)
from transformer_lib.errors import Interrupted, InvalidType, InvalidValue, MissingFile, TransformerLibError
from transformer_lib.family.bert import BERT, MaskedLMTask, SequenceClassifier, mask_tokens
from transformer_lib.family.gpt import GPT, LanguageModelTask, generate
from transformer_lib.family.vit import VisionTransformer, ViTConfig, patchify
from transformer_lib.layers import Decoder, DecoderLayer, Encoder, EncoderLayer, FeedForward
from transformer_lib.metrics import moses_bleu, sacrebleu_score, tokenized_bleu
from transformer_lib.model import Transformer, count_parameters, parameter_breakdown
from transformer_lib.training import Trainer, label_smoothed_cross_entropy, noam_lr
from transformer_lib.training.tasks import (
    ClassificationTask,
    LabelledBatch,
    Task,
    TranslationTask,
    accuracy,
)
from transformer_lib.utils import pick_device, seed_everything, setup


def __getattr__(name: str):
    """Import the tokenizer (and SentencePiece) only when it is first used."""
    if name == "Tokenizer":
        from transformer_lib.tokenizer import Tokenizer

        return Tokenizer
    raise AttributeError(f"module 'transformer_lib' has no attribute {name!r}")


__all__ = [
    "BERT",
    "BOS_ID",
    "EOS_ID",
    "GPT",
    "LANGUAGES",
    "PAD_ID",
    "PRESETS",
    "SPECIAL_TOKENS",
    "SPLITS",
    "UNK_ID",
    "AttentionCache",
    "Batch",
    "ClassificationTask",
    "DataError",
    "Decoder",
    "DecoderLayer",
    "Encoder",
    "EncoderLayer",
    "FeedForward",
    "Interrupted",
    "InvalidType",
    "InvalidValue",
    "KVCache",
    "LabelledBatch",
    "LanguageModelTask",
    "LayerCache",
    "LearnedPositionalEncoding",
    "MaskedLMTask",
    "MissingFile",
    "MultiHeadAttention",
    "SequenceClassifier",
    "SinusoidalPositionalEncoding",
    "StaticKVCache",
    "Task",
    "TaskConfig",
    "TokenEmbedding",
    "Tokenizer",  # noqa: F822 -- imported on first use, by __getattr__ below
    "TrainConfig",
    "Trainer",
    "Transformer",
    "TransformerConfig",
    "TransformerLibError",
    "TranslationTask",
    "ViTConfig",
    "VisionTransformer",
    "accuracy",
    "alibi_bias",
    "alibi_slopes",
    "apply_rotary",
    "average_checkpoints",
    "beam_search",
    "causal_mask",
    "collate",
    "count_parameters",
    "encode_pairs",
    "example_size",
    "generate",
    "greedy_decode",
    "keep_attention_weights",
    "label_smoothed_cross_entropy",
    "load_checkpoint",
    "load_multi30k",
    "load_pairs",
    "mask_tokens",
    "moses_bleu",
    "noam_lr",
    "pad_ids",
    "padding_fraction",
    "padding_mask",
    "parameter_breakdown",
    "patchify",
    "pick_device",
    "sacrebleu_score",
    "sample",
    "scaled_dot_product_attention",
    "seed_everything",
    "setup",
    "sinusoidal_table",
    "sliding_window_mask",
    "tiled_attention",
    "token_batches",
    "tokenized_bleu",
]
