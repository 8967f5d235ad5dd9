"""How long may a translation run? The output length limit against BLEU on the three test sets.

    python -m book_tools.benchmarks.length_limit [--json results/translator/length_limit.json]

Decoding stops a sentence at ``<eos>`` or at its length limit, ``source length + max_extra``
tokens (:func:`~transformer_lib.decoding.length_limits`; the paper's section 6.1 uses + 50). A
translation of a photo's description is about as long as its source, so the limit only matters
when the model loses its way: outside its domain it can repeat a word until the limit, and a
looser limit makes that longer and slower. This decodes test_2016_flickr, test_2017_flickr and
test_2017_mscoco with lesson 11's two shipped models, as the recipe does (beam search) and as the
translator page does (greedy), for each ``max_extra`` in ``CANDIDATES``, and records both BLEU
scores, how many translations differ from those under + 50, and how many reached the limit.

The rule, fixed before measuring: going down from + 50, find the last candidate down to which no
BLEU score (both directions, both decoders, all three test sets) is lower than under + 50. A limit
that cuts only runaway outputs can change a score, and only upwards: it removes repeated words
that match nothing; a lower score means it cut a real translation. The package's default (and so
the pages') becomes the candidate one step looser than that one, a step of margin for a reader's
sentences.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from torch import Tensor

from book_tools.benchmarks import Report, provenance, shipped_translator
from transformer_lib.config import DecodeConfig
from transformer_lib.data import load_multi30k
from transformer_lib.decoding import length_limits
from transformer_lib.metrics import bleu_scores
from transformer_lib.translation import decoder, load_model, translate_in_batches
from transformer_lib.utils import environment

SPLITS = ("test_2016_flickr", "test_2017_flickr", "test_2017_mscoco")
CANDIDATES = (50, 25, 20, 15, 10, 5)  # max_extra; 50 is the paper's and the package's until this record


def translate_counting(model, tokenizer, sources: list[str], decoding: DecodeConfig) -> tuple[list[str], int]:
    """The translations, as :func:`~transformer_lib.translation.translate_sentences` gives them,
    and how many of them reached the length limit (the limit's last token is a forced ``<eos>``)."""
    reached = 0
    decode_ids = decoder(model, decoding, torch.device("cpu"))

    def decode(src: Tensor) -> list[list[int]]:
        nonlocal reached
        limits = length_limits(src, decoding.max_extra, model.config.max_len)  # (batch,)
        out = decode_ids(src)
        reached += sum(len(ids) >= int(limit) - 1 for ids, limit in zip(out, limits, strict=True))
        return out

    return translate_in_batches(tokenizer, sources, decode, decoding.batch_size, model.config.max_len), reached


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, help="only the first N sentences of each test set (a quick check)")
    parser.add_argument("--json", type=Path, help="write the record to this file")
    args = parser.parse_args(argv)
    env = environment(torch.device("cpu"))
    report = Report()
    say = report.say
    say(f"torch {env['torch']}; {env['device']}; commit {env['git_commit'][:7]}")
    say("cased sacreBLEU (lowercased tokenized BLEU); changed: translations that differ from those under + 50")
    rows = []
    for direction in ("de_en", "en_de"):
        checkpoint = shipped_translator(direction)
        model, tokenizer, record = load_model(checkpoint, torch.device("cpu"))
        recipe = record.decoding
        for method, beam_size in (("beam", recipe.beam_size), ("greedy", 1)):
            say()
            say(f"{direction}, {method} (beam {beam_size}, alpha {recipe.alpha})")
            say(f"{'max_extra':>9} " + " ".join(f"{split:>26}" for split in SPLITS) + f" {'reached limit':>14}")
            baseline: dict[str, list[str]] = {}
            for max_extra in CANDIDATES:
                decoding = DecodeConfig(beam_size=beam_size, alpha=recipe.alpha, max_extra=max_extra)
                row = {**provenance(env), "direction": direction, "decoder": method, "max_extra": max_extra}
                start = time.perf_counter()
                cells, reached = [], 0
                for split in SPLITS:
                    sources = load_multi30k(split, record.src)[: args.limit]
                    references = load_multi30k(split, record.tgt)[: args.limit]
                    hypotheses, n = translate_counting(model, tokenizer, sources, decoding)
                    baseline.setdefault(split, hypotheses)
                    changed = sum(a != b for a, b in zip(hypotheses, baseline[split], strict=True))
                    row[split] = {**bleu_scores(hypotheses, references), "changed": changed, "reached_limit": n}
                    reached += n
                    cased, lowered = row[split]["sacrebleu_cased"], row[split]["bleu_tokenized_lowercase"]
                    cells.append(f"{cased:6.2f} ({lowered:5.2f}) {changed:3d} changed")
                row["seconds"] = round(time.perf_counter() - start, 1)
                rows.append(row)
                say(f"{'+ ' + str(max_extra):>9} " + " ".join(f"{c:>26}" for c in cells) + f" {reached:>14}")
    chosen = choose(rows)
    say()
    say(f"chosen: + {chosen}, one step looser than the smallest that lowers no score")
    if args.json:
        report.write(args.json, env, rows, chosen=chosen)


def choose(rows: list[dict]) -> int:
    """The rule of this module's docstring, applied to the measured rows."""

    def scores(max_extra: int) -> list[float]:
        return [
            row[split][key]
            for row in rows
            if row["max_extra"] == max_extra
            for split in SPLITS
            for key in ("sacrebleu_cased", "bleu_tokenized_lowercase")
        ]

    def no_lower(max_extra: int) -> bool:
        return all(score >= base for score, base in zip(scores(max_extra), scores(CANDIDATES[0]), strict=True))

    safe = 0  # index of the last candidate down to which no score fell
    while safe + 1 < len(CANDIDATES) and no_lower(CANDIDATES[safe + 1]):
        safe += 1
    return CANDIDATES[max(safe - 1, 0)]


if __name__ == "__main__":
    main()
