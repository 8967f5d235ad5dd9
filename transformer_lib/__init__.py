"""transformer_lib: the Transformer of "Attention Is All You Need", built lesson by lesson.

Each lesson of the book adds the final version of its component here; later lessons import
it instead of writing it again.
"""

from transformer_lib.data import LANGUAGES, SPLITS, DataError, load_multi30k, load_pairs
from transformer_lib.tokenizer import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS, UNK_ID, Tokenizer
from transformer_lib.utils import pick_device, seed_everything, setup

__version__ = "0.1.0"

__all__ = [
    "BOS_ID",
    "EOS_ID",
    "LANGUAGES",
    "PAD_ID",
    "SPECIAL_TOKENS",
    "SPLITS",
    "UNK_ID",
    "DataError",
    "Tokenizer",
    "load_multi30k",
    "load_pairs",
    "pick_device",
    "seed_everything",
    "setup",
]
