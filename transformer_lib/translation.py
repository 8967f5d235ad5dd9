"""A trained run in use: load it from its checkpoint, translate sentences with it, score it on a split.

The command line (``translate``, ``evaluate``, the end of ``train``), the web export and the
benchmarks all translate through here.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from torch import Tensor
from tqdm import tqdm

from transformer_lib.batching import pad_ids
from transformer_lib.checkpoint import RunRecord, load_run_checkpoint
from transformer_lib.config import DecodeConfig
from transformer_lib.data import load_multi30k
from transformer_lib.decoding import beam_search, greedy_decode
from transformer_lib.metrics import bleu_scores
from transformer_lib.model import Transformer
from transformer_lib.tokenizer import Tokenizer


def translate_sentences(
    model: Transformer,
    tokenizer: Tokenizer,
    sentences: Sequence[str],
    decoding: DecodeConfig,
    device: torch.device,
    progress: bool = False,
) -> list[str]:
    """Translate plain sentences, in batches of similar length, keeping their order.

    An empty (or blank) sentence gives an empty translation. A sentence longer than the model's
    ``max_len`` positions cannot be encoded: it gives an empty translation and one line on
    standard error that says which it was; every other sentence is still translated.
    ``progress`` shows a bar of sentences translated (on standard error).
    """
    model.eval()
    decode = decoder(model, decoding, device)
    return translate_in_batches(tokenizer, sentences, decode, decoding.batch_size, model.config.max_len, progress)


def decoder(model: Transformer, decoding: DecodeConfig, device: torch.device) -> Callable[[Tensor], list[list[int]]]:
    """Padded source ids (batch, src_len) -> one id list per sentence, decoded as ``decoding``
    says: greedily for beam 1, else by beam search."""

    def decode(src: Tensor) -> list[list[int]]:
        src = src.to(device)
        if decoding.beam_size == 1:
            return greedy_decode(model, src, decoding.max_extra, cuda_graph=decoding.cuda_graph)
        return beam_search(
            model, src, decoding.beam_size, decoding.alpha, decoding.max_extra, cuda_graph=decoding.cuda_graph
        )

    return decode


def translate_in_batches(
    tokenizer: Tokenizer,
    sentences: Sequence[str],
    decode: Callable[[Tensor], list[list[int]]],
    batch_size: int,
    max_len: int,
    progress: bool = False,
) -> list[str]:
    """The loop of :func:`translate_sentences` around any ``decode`` (padded source ids
    (batch, src_len) -> one id list per sentence): a PyTorch model's, or an exported one's
    (``book_tools.web.export.OnnxTranslator``, the book's tools)."""
    encoded = dict(zip(range(len(sentences)), tokenizer.encode_batch(list(sentences), eos=True), strict=True))
    out: list[str] = [""] * len(sentences)
    for i, ids in list(encoded.items()):
        if not sentences[i].strip():
            del encoded[i]
        elif len(ids) > max_len:
            print(
                f"sentence {i + 1}: {len(ids)} tokens, more than the model's max_len={max_len}; left untranslated",
                file=sys.stderr,
            )
            del encoded[i]
    order = sorted(encoded, key=lambda i: len(encoded[i]))
    bar = tqdm(total=len(sentences), desc="translate", unit="sent", disable=not progress, mininterval=1.0)
    bar.update(len(sentences) - len(order))
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        for i, hyp in zip(chunk, decode(pad_ids([encoded[i] for i in chunk])), strict=True):
            out[i] = tokenizer.decode(hyp)
        bar.update(len(chunk))
    bar.close()
    return out


def evaluate_split(
    model: Transformer,
    tokenizer: Tokenizer,
    record: RunRecord,
    split: str,
    decoding: DecodeConfig,
    device: torch.device,
    limit: int | None = None,
    progress: bool = False,
) -> dict:
    """BLEU of the model on one split, in the direction of its run's ``record``; the scores and the hypotheses."""
    sources = load_multi30k(split, record.src)[:limit]
    references = load_multi30k(split, record.tgt)[:limit]
    start = time.perf_counter()
    hypotheses = translate_sentences(model, tokenizer, sources, decoding, device, progress)
    return {
        "split": split,
        "sentences": len(sources),
        **bleu_scores(hypotheses, references),
        "decoding": dataclasses.asdict(decoding),
        "seconds": round(time.perf_counter() - start, 1),
        "hypotheses": hypotheses,
    }


def load_model(checkpoint: str | Path, device: torch.device) -> tuple[Transformer, Tokenizer, RunRecord]:
    """The model, tokenizer and :class:`~transformer_lib.checkpoint.RunRecord` of a run: its folder,
    or a checkpoint file that ``train`` wrote."""
    saved = load_run_checkpoint(checkpoint, map_location=device)
    record = saved.run
    model = Transformer(record.model).to(device)
    model.load_state_dict(saved.weights)
    return model.eval(), Tokenizer(record.tokenizer), record
