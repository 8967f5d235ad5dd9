"""Subword tokenization with SentencePiece (Kudo and Richardson, 2018).

The Transformer reads integer ids. A :class:`Tokenizer` turns a sentence into ids of subword
pieces and back. Four ids are reserved, the same in every tokenizer this package trains, so
that models, losses and decoders can name them as constants:

====  =========  ==================================================================
 id   piece      meaning
====  =========  ==================================================================
  0   ``<pad>``  filler that makes sentences of a batch equally long; never predicted
  1   ``<bos>``  beginning of sentence: the decoder's first input
  2   ``<eos>``  end of sentence: the decoder's last target, where generation stops
  3   ``<unk>``  a character never seen in training
====  =========  ==================================================================

Training is deterministic: the same sentences and settings give the same model, byte for byte.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import sentencepiece as spm

from transformer_lib.config import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS, UNK_ID
from transformer_lib.errors import InvalidValue, MissingFile
from transformer_lib.files import write_bytes


class Tokenizer:
    """A trained SentencePiece model with the package's fixed special ids."""

    def __init__(self, model_proto: bytes) -> None:
        self._sp = spm.SentencePieceProcessor(model_proto=model_proto)
        found = {
            "<pad>": self._sp.pad_id(),
            "<bos>": self._sp.bos_id(),
            "<eos>": self._sp.eos_id(),
            "<unk>": self._sp.unk_id(),
        }
        if found != SPECIAL_TOKENS:
            raise InvalidValue(
                f"this SentencePiece model has special ids {found}, but transformer_lib needs "
                f"{SPECIAL_TOKENS}; train it with Tokenizer.train"
            )
        self._proto = model_proto

    @classmethod
    def train(
        cls,
        sentences: Iterable[str],
        vocab_size: int,
        model_type: str = "bpe",
        character_coverage: float = 1.0,
        extra_symbols: Sequence[str] = (),
    ) -> Tokenizer:
        """Learn a vocabulary of ``vocab_size`` pieces (special ids included) from ``sentences``.

        ``model_type`` is ``"bpe"``, byte-pair encoding as in the paper (Sennrich et al., 2016),
        or ``"unigram"``, SentencePiece's own default. Every sentence is used, in the order
        given, on one thread, so training is deterministic. ``extra_symbols`` are further special
        tokens (say BERT's ``"<mask>"``, lesson 13), given the ids that follow the four of
        :data:`~transformer_lib.config.SPECIAL_TOKENS`, in order.
        """
        if model_type not in ("unigram", "bpe"):
            raise InvalidValue(f"model_type must be 'unigram' or 'bpe', got {model_type!r}")
        if vocab_size <= len(SPECIAL_TOKENS):
            raise InvalidValue(f"vocab_size must exceed the {len(SPECIAL_TOKENS)} special tokens, got {vocab_size}")
        model = io.BytesIO()
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(sentences),
                model_writer=model,
                vocab_size=vocab_size,
                model_type=model_type,
                character_coverage=character_coverage,
                pad_id=PAD_ID,
                bos_id=BOS_ID,
                eos_id=EOS_ID,
                unk_id=UNK_ID,
                bos_piece="<bos>",
                user_defined_symbols=list(extra_symbols),
                eos_piece="<eos>",
                input_sentence_size=0,  # use every sentence
                shuffle_input_sentence=False,
                num_threads=1,  # several threads may order ties differently
                minloglevel=2,  # training chatter off
            )
        except RuntimeError as exc:  # SentencePiece's own message, e.g. a vocabulary larger than the text allows
            reason = str(exc).strip().splitlines()[-1]
            raise InvalidValue(
                f"SentencePiece cannot train a vocabulary of {vocab_size} on this text ({reason}); "
                "lower vocab_size or give more text"
            ) from None
        return cls(model.getvalue())

    @classmethod
    def load(cls, path: str | os.PathLike) -> Tokenizer:
        path = Path(path)
        if not path.is_file():
            raise MissingFile(f"no tokenizer at {path}; train one with Tokenizer.train(...).save(path)")
        return cls(path.read_bytes())

    def save(self, path: str | os.PathLike) -> None:
        """Write the model file atomically (a temporary file in the same folder, then rename)."""
        write_bytes(path, self._proto)

    def to_bytes(self) -> bytes:
        """The serialized SentencePiece model: ``Tokenizer(tokenizer.to_bytes())`` is a copy."""
        return self._proto

    @property
    def vocab_size(self) -> int:
        return self._sp.get_piece_size()

    def __len__(self) -> int:
        return self.vocab_size

    def encode(self, text: str, bos: bool = False, eos: bool = False) -> list[int]:
        """Ids of ``text``'s pieces, optionally framed by ``<bos>`` and ``<eos>``."""
        return self._sp.encode(text, add_bos=bos, add_eos=eos)

    def encode_batch(self, texts: Sequence[str], bos: bool = False, eos: bool = False) -> list[list[int]]:
        return self._sp.encode(list(texts), add_bos=bos, add_eos=eos)

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids``; special tokens (padding, ``<bos>``, ``<eos>``) are dropped."""
        bad = [i for i in ids if not 0 <= int(i) < self.vocab_size]
        if bad:
            raise InvalidValue(f"token ids {bad[:5]} are outside the vocabulary [0, {self.vocab_size})")
        return self._sp.decode([int(i) for i in ids])

    def pieces(self, text: str) -> list[str]:
        """The subword pieces of ``text`` as strings (``▁`` marks the start of a word)."""
        return self._sp.encode(text, out_type=str)

    def id_to_piece(self, i: int) -> str:
        return self._sp.id_to_piece(i)

    def piece_to_id(self, piece: str) -> int:
        return self._sp.piece_to_id(piece)
