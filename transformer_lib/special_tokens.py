"""The special token ids, shared by the tokenizer, the masks, batching, the loss and decoding.

One place for them, with no dependencies, so that importing attention or the model does not
import SentencePiece. Every tokenizer of the package reserves these ids (lesson 2).
"""

PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
SPECIAL_TOKENS: dict[str, int] = {"<pad>": PAD_ID, "<bos>": BOS_ID, "<eos>": EOS_ID, "<unk>": UNK_ID}
"""Each special piece and its id, in id order: padding, begin and end of sentence, unknown."""
