"""How many checkpoints to average: one run's last N kept checkpoints, each mean scored on val.

    python -m book_tools.benchmarks.checkpoint_average runs/cpu_average10/de_en-average10 [--limit N]
        [--json results/multi30k/cpu/average/de_en.json]

The recipe translates with the mean of its last 4 checkpoints (saved every 100 updates). A run
that kept its last 10 (``training.keep_last: 10``) can be averaged over its last 1, 2, 4 and 10
afterwards, so the comparison is paired: the same run, the same updates, only the window differs.
A second run on another hour would make a different number of updates, and the machine's speed
moves BLEU by more than a window would.

The rule, fixed before measuring: the window with the best val sacreBLEU replaces the recipe's 4
if it beats it by at least ``MARGIN``. One run: a gain has to be large to count.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from book_tools.benchmarks import Report, provenance
from transformer_lib.checkpoint import AVERAGED, average_checkpoints, kept_weights, step_of
from transformer_lib.translation import evaluate_split, load_model
from transformer_lib.utils import environment

WINDOWS = (1, 2, 4, 10)
RECIPE = 4
MARGIN = 0.3  # sacreBLEU points on val
CPU = torch.device("cpu")


def choose(val: dict[int, float]) -> int:
    """The rule of this module's docstring: ``val`` maps a window to its val score."""
    best = max(val, key=val.get)
    return best if val[best] - val[RECIPE] >= MARGIN else RECIPE


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a finished run's folder that kept its last 10 checkpoints")
    parser.add_argument("--limit", type=int, help="only the first N sentences (a quick check)")
    parser.add_argument("--json", type=Path, help="write the record to this file")
    args = parser.parse_args(argv)
    weights = kept_weights(args.run)
    if len(weights) < max(WINDOWS) or not (args.run / AVERAGED).is_file():
        parser.error(f"{args.run} is not a finished run with {max(WINDOWS)} kept checkpoints (training.keep_last)")
    env = environment(CPU)
    model, tokenizer, record = load_model(args.run / AVERAGED, CPU)
    decoding = record.decoding
    report = Report()
    report.say(f"torch {env['torch']}; {env['device']}; commit {env['git_commit'][:7]}; run {args.run.name}")
    report.say(f"val, beam {decoding.beam_size}, alpha {decoding.alpha}: the mean of the last N checkpoints")
    report.say(f"{'N':>3} {'updates':>13} {'sacreBLEU':>10} {'BLEU tok.lc':>12}")
    rows, val = [], {}
    for n in WINDOWS:
        model.load_state_dict(average_checkpoints(weights[-n:]))
        scores = evaluate_split(model, tokenizer, record, "val", decoding, CPU, args.limit)
        scores.pop("hypotheses")
        first, last = step_of(weights[-n]), step_of(weights[-1])
        rows.append({**provenance(env), "run": args.run.name, "window": n, "first": first, "last": last, **scores})
        val[n] = scores["sacrebleu_cased"]
        report.say(f"{n:3d} {first:>6,}-{last:<6,} {val[n]:10.2f} {scores['bleu_tokenized_lowercase']:12.2f}")
    chosen = choose(val)
    report.say(f"chosen: the last {chosen} (a window must gain >= {MARGIN} over the recipe's {RECIPE})")
    if args.json:
        report.write(args.json, env, rows, chosen=chosen, margin=MARGIN)


if __name__ == "__main__":
    main()
