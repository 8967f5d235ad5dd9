"""Beam size and length penalty of the CPU recipe, chosen on val from its seeds' models.

    python -m book_tools.benchmarks.beam_settings runs/cpu_seeds/de_en-seed* [--limit N]
        [--json results/multi30k/cpu/beam/de_en.json] [--beams 5 8] [--alphas 0.6 1.4 1.8] [--recipe 5 1.4]

The recipe first decoded with beam 5 and length penalty alpha 0.6 (the GPU recipe's, never tuned
for the CPU's smaller, less trained models); its configs (``multi30k_*_cpu.yaml``) now hold what
this chose, and ``--recipe`` still defaults to that first setting. This decodes ``val`` with each run's averaged model
(``checkpoint_averaged.pt``, which ``train`` writes and the records do not keep) for every
``(beam, alpha)`` of the grid (``--beams`` by ``--alphas``; by default the first grid, below). The
comparison is paired: every setting decodes the same models, so a seed's luck is in every column alike.

The rule, fixed before measuring, is :func:`transformer_lib.benchmarks.beam_settings.choose`'s, against
the recipe's setting (``--recipe``, by default beam 5 and alpha 0.6). The test set is decoded only
under the recipe's setting and the chosen one, and reported, never used to choose.

The second grid (``*_alpha.json``): every alpha above 0.6 won in the first, and 1.4 was its
edge, so ``--beams 5 8 --alphas 0.6 1.4 1.8 2.2 2.6`` with each direction's recipe (German→English beam
5 alpha 0.6, English→German beam 5 alpha 1.4). Predicted before it ran: the best alpha is 1.8 or 2.2,
German→English gains 0.3 to 0.6 and now on every model, English→German gains under 0.2 over its 1.4.

The third grid (``*_rotary.json``): the same choice for the rotary seeds' models
(``runs/cpu_seeds_rotary/de_en-rotary-seed*``, ``runs/cpu_seeds_rotary_en_de/en_de-rotary-seed*``),
``--beams 5 8 --alphas 0.6 1.0 1.4 1.8``, each direction against its recipe's setting. Predicted
before it ran: German→English's best is alpha 1.0 or 1.4, 0.2 to 0.4 above 0.6 (1.4 gained 0.28 with
the sinusoidal models, not on every model); English→German keeps 1.4 (no setting 0.2 above it).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from book_tools.benchmarks import Report, provenance
from transformer_lib.benchmarks.beam_settings import MARGIN, RECIPE, choose
from transformer_lib.checkpoint import AVERAGED
from transformer_lib.config import DecodeConfig
from transformer_lib.translation import evaluate_split, load_model
from transformer_lib.utils import environment

BEAMS = (3, 5, 8)
ALPHAS = (0.6, 1.0, 1.4)
CPU = torch.device("cpu")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="+", help=f"run folders, each with {AVERAGED}")
    parser.add_argument("--limit", type=int, help="only the first N sentences (a quick check)")
    parser.add_argument("--json", type=Path, help="write the record to this file")
    parser.add_argument("--beams", type=int, nargs="+", default=list(BEAMS), help="beam sizes of the grid")
    parser.add_argument("--alphas", type=float, nargs="+", default=list(ALPHAS), help="length penalties of the grid")
    parser.add_argument("--recipe", nargs=2, type=float, default=list(RECIPE), metavar=("BEAM", "ALPHA"))
    args = parser.parse_args(argv)
    recipe = int(args.recipe[0]), args.recipe[1]
    if recipe[0] not in args.beams or recipe[1] not in args.alphas:
        parser.error(f"the recipe, beam {recipe[0]} alpha {recipe[1]}, must be in the grid it is compared with")
    missing = [str(run) for run in args.runs if not (run / AVERAGED).is_file()]
    if missing:
        parser.error(f"no {AVERAGED} in {', '.join(missing)}: give the folders of finished runs")
    env = environment(CPU)
    report = Report()
    say = report.say
    models = {run.name: load_model(run / AVERAGED, CPU) for run in args.runs}
    say(f"torch {env['torch']}; {env['device']}; commit {env['git_commit'][:7]}; {len(models)} models")
    say(f"val cased sacreBLEU of each run's averaged model; the mean's gain over beam {recipe[0]}, alpha {recipe[1]}")
    say(f"{'beam':>4} {'alpha':>5} " + " ".join(f"{name:>14}" for name in models) + f" {'mean':>6} {'gain':>6}")
    rows, val = [], {}
    for beam in args.beams:
        for alpha in args.alphas:
            decoding = DecodeConfig(beam_size=beam, alpha=alpha)
            val[beam, alpha] = []
            for name, (model, tokenizer, record) in models.items():
                scores = evaluate_split(model, tokenizer, record, "val", decoding, CPU, args.limit)
                scores.pop("hypotheses")
                rows.append({**provenance(env), "run": name, **scores})
                val[beam, alpha].append(scores["sacrebleu_cased"])
    for (beam, alpha), scores in val.items():
        gain = statistics.mean(scores) - statistics.mean(val[recipe])
        cells = " ".join(f"{score:14.2f}" for score in scores)
        say(f"{beam:4d} {alpha:5.1f} {cells} {statistics.mean(scores):6.2f} {gain:+6.2f}")
    chosen = choose(val, recipe)
    say()
    say(f"chosen: beam {chosen[0]}, alpha {chosen[1]} (a setting must gain >= {MARGIN} in the mean and on every model)")
    say("test_2016_flickr (reported, not used to choose):")
    for beam, alpha in dict.fromkeys([recipe, chosen]):
        start = time.perf_counter()
        tests = []
        for name, (model, tokenizer, record) in models.items():
            scores = evaluate_split(
                model, tokenizer, record, "test_2016_flickr", DecodeConfig(beam_size=beam, alpha=alpha), CPU, args.limit
            )
            scores.pop("hypotheses")
            rows.append({**provenance(env), "run": name, **scores})
            tests.append(scores["sacrebleu_cased"])
        cells = " ".join(f"{score:6.2f}" for score in tests)
        seconds = time.perf_counter() - start
        say(f"  beam {beam}, alpha {alpha}: {cells}; mean {statistics.mean(tests):.2f} ({seconds:.0f} s)")
    if args.json:
        report.write(
            args.json,
            env,
            rows,
            chosen={"beam_size": chosen[0], "alpha": chosen[1]},
            recipe={"beam_size": recipe[0], "alpha": recipe[1]},
            margin=MARGIN,
        )


if __name__ == "__main__":
    main()
