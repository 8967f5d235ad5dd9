"""Where the command line's translating lived: it is the core's now (:mod:`transformer_lib.translation`).

Kept so that ``from transformer_lib.cli.translation import load_model`` goes on working.
"""

from transformer_lib.translation import evaluate_split, load_model, translate_in_batches, translate_sentences

__all__ = ["evaluate_split", "load_model", "translate_in_batches", "translate_sentences"]
