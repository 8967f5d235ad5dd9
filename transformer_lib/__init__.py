"""transformer_lib: the Transformer of "Attention Is All You Need", built lesson by lesson.

Each lesson of the book adds the final version of its component here; later lessons import
it instead of writing it again.
"""

from transformer_lib.attention import (
    MultiHeadAttention,
    causal_mask,
    keep_attention_weights,
    padding_mask,
    scaled_dot_product_attention,
)
from transformer_lib.data import LANGUAGES, SPLITS, DataError, load_multi30k, load_pairs
from transformer_lib.embeddings import (
    LearnedPositionalEncoding,
    SinusoidalPositionalEncoding,
    TokenEmbedding,
    apply_rotary,
    sinusoidal_table,
)
from transformer_lib.layers import Decoder, DecoderLayer, Encoder, EncoderLayer, FeedForward
from transformer_lib.model import PRESETS, Transformer, TransformerConfig, count_parameters, parameter_breakdown
from transformer_lib.tokenizer import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS, UNK_ID, Tokenizer
from transformer_lib.utils import pick_device, seed_everything, setup

__version__ = "0.1.0"

__all__ = [
    "BOS_ID",
    "EOS_ID",
    "LANGUAGES",
    "PAD_ID",
    "PRESETS",
    "SPECIAL_TOKENS",
    "SPLITS",
    "UNK_ID",
    "DataError",
    "Decoder",
    "DecoderLayer",
    "Encoder",
    "EncoderLayer",
    "FeedForward",
    "LearnedPositionalEncoding",
    "MultiHeadAttention",
    "SinusoidalPositionalEncoding",
    "TokenEmbedding",
    "Tokenizer",
    "Transformer",
    "TransformerConfig",
    "apply_rotary",
    "causal_mask",
    "count_parameters",
    "keep_attention_weights",
    "load_multi30k",
    "load_pairs",
    "padding_mask",
    "parameter_breakdown",
    "pick_device",
    "scaled_dot_product_attention",
    "seed_everything",
    "setup",
    "sinusoidal_table",
]
