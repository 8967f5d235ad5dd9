"""How long a trained translator takes to translate a whole test set.

    python -m book_tools.benchmarks.decode_speed [--model translators/de_en.model_fp16.pt]
        [--split test_2016_flickr] [--beam-sizes 1 5] [--batch-size 128] [--repeats 3] [--json FILE]

Translates every sentence of ``--split`` (1,000 for test_2016_flickr) with the model of a run
checkpoint, as ``evaluate`` does: tokenizing, batching by length, beam search with the key-value
cache, detokenizing. Reports the median wall time over ``--repeats`` runs after one warm-up, the
sentences per second and the cased sacreBLEU of the output (so that a faster setting that
translates worse would show). ``--cuda-graph`` adds a row for each beam size decoded with each
cached step replayed as a CUDA graph (``DecodeConfig.cuda_graph``; on a CPU, the fixed buffers alone).
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import torch

from book_tools.benchmarks import provenance, shipped_translator, write_record
from transformer_lib.benchmarks import median_seconds
from transformer_lib.config import DecodeConfig
from transformer_lib.data import load_multi30k
from transformer_lib.metrics import bleu_scores
from transformer_lib.translation import load_model, translate_sentences
from transformer_lib.utils import environment


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="a run checkpoint or model_fp16.pt (default: the shipped de_en)")
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--beam-sizes", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--batch-size", type=int, default=DecodeConfig.batch_size, help="sentences decoded together")
    parser.add_argument("--limit", type=int, help="only the first N sentences (a quick check on a CPU)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cuda-graph", action="store_true", help="also decode replaying each step as a CUDA graph")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args(argv)
    args.model = args.model or shipped_translator("de_en")
    device = torch.device(args.device)
    env = environment(device)
    model, tokenizer, record = load_model(args.model, device)
    sources = load_multi30k(args.split, record.src)[: args.limit]
    references = load_multi30k(args.split, record.tgt)[: args.limit]
    print(f"{args.model.name} ({record.src}→{record.tgt}), {len(sources)} sentences of {args.split}")
    print(f"torch {env['torch']}; {env['device']}; commit {env['git_commit'][:7]}\n")
    print(f"{'beam':>4} {'batch':>5} {'graph':>5} {'seconds':>8} {'sent/s':>7} {'BLEU':>6}")
    rows = []
    graphs = (False, True) if args.cuda_graph else (False,)
    for beam, graph in itertools.product(args.beam_sizes, graphs):
        decoding = DecodeConfig(beam_size=beam, batch_size=args.batch_size, cuda_graph=graph)
        hypotheses, seconds, times = median_seconds(
            lambda decoding=decoding: translate_sentences(model, tokenizer, sources, decoding, device),
            args.repeats,
            device,
        )
        bleu = bleu_scores(hypotheses, references)["sacrebleu_cased"]
        rows.append(
            {
                **provenance(env),
                "model": args.model.name,
                "split": args.split,
                "sentences": len(sources),
                "beam_size": beam,
                "batch_size": args.batch_size,
                "cuda_graph": graph,
                "seconds": seconds,
                "all_seconds": times,
                "bleu": bleu,
            }
        )
        print(
            f"{beam:>4} {args.batch_size:>5} {'yes' if graph else 'no':>5} {seconds:>8.2f} "
            f"{len(sources) / seconds:>7.0f} {bleu:>6.2f}",
            flush=True,
        )
    if args.json:
        write_record(args.json, env, rows)
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
