"""What exporting a translator to ONNX costs: file size and BLEU for each precision.

    python -m book_tools.benchmarks.onnx_precision [--models CKPT ...] [--precisions fp32 fp16 int8]
        [--split test_2016_flickr] [--limit N] [--json results/translator/onnx_precision.json]

For each checkpoint (by default lesson 11's two translators): greedy decoding in PyTorch, then the
exported encoder and decoder in ONNX Runtime at each precision, on every sentence of ``--split``.
Prints the size of the model's files (the two ONNX files and the tensors they share, ``shared.bin``),
cased sacreBLEU, how many translations equal PyTorch's, and the seconds taken. The book's
translator page reads its BLEU from the record this writes.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from book_tools.benchmarks import provenance, shipped_translator, write_record
from book_tools.web.export import MODEL_FILES, PRECISIONS, OnnxTranslator, export_onnx
from transformer_lib.config import DecodeConfig
from transformer_lib.data import load_multi30k
from transformer_lib.files import sha256_of
from transformer_lib.metrics import bleu_scores
from transformer_lib.translation import load_model, translate_sentences
from transformer_lib.utils import environment


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=Path, nargs="+", help="run checkpoints (default: the two shipped translators)")
    parser.add_argument("--precisions", nargs="+", choices=PRECISIONS, default=list(PRECISIONS))
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--limit", type=int, help="only the first N sentences (a quick check)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path, help="write the rows to this file (a whole run: no --limit)")
    args = parser.parse_args(argv)
    if args.json and args.limit is not None:  # the translator page reads its BLEU from the record
        parser.error("--json writes a record of the whole split: run without --limit (or without --json)")
    args.models = args.models or [shipped_translator("de_en"), shipped_translator("en_de")]
    torch.set_num_threads(args.threads)
    env = environment(torch.device("cpu"))
    print(f"torch {env['torch']}; {env['device']}; commit {env['git_commit'][:7]}; {args.split}, greedy\n")
    print(f"{'model':<22} {'runtime':<12} {'precision':<9} {'MB':>5} {'BLEU':>6} {'same':>6} {'seconds':>8}")
    rows = []
    for checkpoint in args.models:
        model, tokenizer, record = load_model(checkpoint, torch.device("cpu"))
        model = model.float()
        sources = load_multi30k(args.split, record.src)[: args.limit]
        references = load_multi30k(args.split, record.tgt)[: args.limit]
        common = {
            **provenance(env),
            "direction": record.direction,
            "checkpoint": checkpoint.name,
            "checkpoint_sha256": sha256_of(checkpoint),
            "split": args.split,
            "sentences": len(sources),
            "decoding": "greedy",
        }
        start = time.perf_counter()
        reference = translate_sentences(model, tokenizer, sources, DecodeConfig(beam_size=1), torch.device("cpu"))
        runs = [("pytorch", "checkpoint", None, reference, time.perf_counter() - start)]
        for precision in args.precisions:
            with tempfile.TemporaryDirectory() as tmp:
                folder = export_onnx(checkpoint, tmp, precision)
                megabytes = sum((folder / f).stat().st_size for f in MODEL_FILES) / 1e6
                start = time.perf_counter()
                hypotheses = OnnxTranslator(folder, args.threads).translate(sources)
                runs.append(("onnxruntime", precision, megabytes, hypotheses, time.perf_counter() - start))
        for runtime, precision, megabytes, hypotheses, seconds in runs:
            row = {
                **common,
                "runtime": runtime,
                "precision": precision,
                "megabytes": None if megabytes is None else round(megabytes, 2),
                "sacrebleu_cased": bleu_scores(hypotheses, references)["sacrebleu_cased"],
                "same_as_pytorch": sum(h == r for h, r in zip(hypotheses, reference, strict=True)),
                "seconds": round(seconds, 1),
            }
            rows.append(row)
            size = "" if megabytes is None else f"{megabytes:.1f}"
            print(
                f"{checkpoint.name:<22} {runtime:<12} {precision:<9} {size:>5} {row['sacrebleu_cased']:>6.2f} "
                f"{row['same_as_pytorch']:>6} {row['seconds']:>8.1f}"
            )
    if args.json:
        write_record(args.json, env, rows)


if __name__ == "__main__":
    main()
