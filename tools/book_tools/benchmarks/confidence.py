"""How sure the translator page's models are, inside their domain and outside it.

    python -m book_tools.benchmarks.confidence [--json results/translator/confidence.json]

Lesson 11's translators learned from Multi30k: descriptions of photos. For each direction this
decodes, greedily and one sentence at a time as the page does (the exported ONNX files, in the
precision the page serves, :meth:`~book_tools.web.export.OnnxTranslator.translate_one`), every sentence of
test_2016_flickr and a handful of everyday sentences outside that domain (``OUTSIDE``, written for
this), and records each one's confidence: the mean probability of the tokens the model chose.

The page offers three test sentences (``EXAMPLES``) and the first two everyday ones to start from.
It warns below a **threshold chosen on the test set**: the confidence that 5 % of
test_2016_flickr's sentences fall below (its 5th percentile, rounded down to 0.01), so the
warning fires on about one in twenty sentences of the kind the model knows. The record says how
often it fires on the sentences outside the domain, and how many of those did not finish (reached
the length limit without choosing ``<eos>``). The site build puts each threshold into the page's
``model.json``.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from book_tools.benchmarks import Report, provenance, served_precision, shipped_translator
from book_tools.web.export import PRECISIONS, OnnxTranslator, cached_export
from transformer_lib.data import load_multi30k
from transformer_lib.files import sha256_of
from transformer_lib.utils import environment

PERCENTILE = 5  # the warning fires on this share of the test set's sentences, by construction
EXAMPLES = (4, 6, 12)  # lines of test_2016_flickr that the page offers to start from (none is in train)
# Everyday sentences: speech, questions, news, the office; none describes a photo.
OUTSIDE = {
    "de_en": [
        "Wie spät ist es?",
        "Die Regierung hat neue Steuern angekündigt.",
        "Ich habe heute keine Zeit, weil ich arbeiten muss.",
        "Kannst du mir bitte helfen?",
        "Der Aktienmarkt ist gestern stark gefallen.",
        "Ich liebe dich.",
        "Das Wetter wird morgen besser.",
        "Wo ist der Bahnhof?",
        "Bitte schicken Sie mir die Rechnung bis Freitag.",
        "Die Verhandlungen über den Vertrag wurden abgebrochen.",
    ],
    "en_de": [
        "What time is it?",
        "The government announced new taxes.",
        "I have no time today because I have to work.",
        "Can you help me, please?",
        "The stock market fell sharply yesterday.",
        "I love you.",
        "The weather will be better tomorrow.",
        "Where is the train station?",
        "Please send me the invoice by Friday.",
        "The negotiations about the contract were broken off.",
    ],
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, help="only the first N test sentences (a quick check)")
    parser.add_argument("--json", type=Path, help="write the record to this file (a whole run: no --limit)")
    parser.add_argument(
        "--precision", choices=PRECISIONS, help="of the exported files (default: what the page serves, _config.yml)"
    )
    args = parser.parse_args(argv)
    if args.json and args.limit is not None:  # the site build takes the page's thresholds from the record
        parser.error("--json writes a record of the whole test set: run without --limit (or without --json)")
    precision = args.precision or served_precision()
    torch.set_num_threads(1)
    env = environment(torch.device("cpu"))
    report = Report()  # printed, and the text record the translator page shows
    say = report.say
    say(
        f"torch {env['torch']}; {env['device']}; commit {env['git_commit'][:7]}; the {precision} ONNX files; "
        "greedy, one sentence at a time"
    )
    say()
    rows = []
    for direction, outside in OUTSIDE.items():
        checkpoint = shipped_translator(direction)
        translator = OnnxTranslator(cached_export(checkpoint, precision))
        start = time.perf_counter()
        sources = load_multi30k("test_2016_flickr", translator.info["src"])[: args.limit]
        test = [translator.translate_one(s) for s in sources]
        everyday = [translator.translate_one(s) for s in outside]
        scores = [t.confidence for t in test]
        threshold = math.floor(float(np.percentile(scores, PERCENTILE)) * 100) / 100
        row = {
            **provenance(env),
            "direction": direction,
            "checkpoint": checkpoint.name,
            "checkpoint_sha256": sha256_of(checkpoint),
            "precision": precision,
            "threshold": threshold,
            "rule": f"the {PERCENTILE}th percentile of test_2016_flickr's, rounded down",
            "test_sentences": len(test),
            "test_median": round(statistics.median(scores), 4),
            "test_warned": sum(s < threshold for s in scores),
            "test_unfinished": sum(not t.finished for t in test),
            "outside": [
                {"source": s, "translation": t.text, "confidence": round(t.confidence, 4), "finished": t.finished}
                for s, t in zip(outside, everyday, strict=True)
            ],
            "examples": [
                {"line": i, "source": sources[i], "confidence": round(test[i].confidence, 4)}
                for i in EXAMPLES
                if i < len(test)
            ],
            "outside_warned": sum(t.confidence < threshold or not t.finished for t in everyday),
            "seconds": round(time.perf_counter() - start, 1),
        }
        rows.append(row)
        say(f"{direction}: warned below {threshold:.2f}, {row['rule']}")
        say(f"  test_2016_flickr: median {row['test_median']:.2f}; warned {row['test_warned']} of {len(test)}; "
            f"did not finish {row['test_unfinished']}")  # fmt: skip
        say(
            f"  outside the domain: warned {row['outside_warned']} of {len(outside)} "
            "(a low confidence, or did not finish)"
        )
        for item in row["outside"]:
            mark = ", did not finish" if not item["finished"] else ""
            say(f"  {item['confidence']:.2f}{mark}  {item['source']}")
            say(f"        -> {item['translation'][:72]}")
        say()
    if args.json:
        report.write(args.json, env, rows)


if __name__ == "__main__":
    main()
