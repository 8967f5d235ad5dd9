"""Updates per second of lesson 11's CPU recipe, and where a step's time goes.

    python -m book_tools.benchmarks.cpu_speed [--config multi30k_de_en_cpu] [--steps 45]
        [--json results/multi30k/cpu/speed/de_en.json]

The recipe's model and token batches (its config, as ``train`` builds them) and the
:class:`~transformer_lib.training.Trainer`'s step, every variant in one process on this machine:
each trains the same batches from the same initial weights, in interleaved rounds, so that a
machine that slows down during the run slows every variant alike. At equal model and batch:

* ``fp32``: what ``train --config multi30k_de_en_cpu --device cpu`` runs today;
* ``fp32+compile``: the model under ``torch.compile(dynamic=True)``, which the Trainer leaves out
  on a CPU (token batches change shape every step);
* ``bf16``: autocast to bf16 on the CPU (fast only where the CPU has bf16 instructions);

and, to price one part, ``no-dropout`` (dropout 0: another recipe, not a speed-up of this one), and
the recipe with each position encoding, ``sinusoidal`` (added to the embeddings) and ``rotary``
(queries and keys rotated in self-attention). On request (``--variants``), the price of other
shapes: ``4+4`` layers, ``d_model-192`` (with d_ff 384), ``d_ff-512``, ``4+4-d_ff-512`` (both),
``8-heads`` (d_head 16), ``2+2-d_model-192`` (fewer, wider layers, d_ff 384), and ``post-norm``
(the paper's order: each sub-layer's norm after its residual sum); and of other batches,
``batch-1024`` and ``batch-4096`` (token slots per batch, the recipe's 2,048 halved or doubled),
which train batches of their own from the same sentences: their target tokens a second, beside
their updates, say what a run of the same time would see.
Then the output layer's parts alone, at the recipe's batch of target tokens: the projection to the
vocabulary (forward, and the two matmuls of its backward) and log-softmax (forward and backward),
in fp32 and in bf16, against the whole step's time.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from book_tools.benchmarks import Report, provenance  # the helpers every record uses
from transformer_lib.batching import encode_pairs
from transformer_lib.benchmarks import median_seconds
from transformer_lib.config import PAD_ID
from transformer_lib.data import load_pairs
from transformer_lib.model import Transformer
from transformer_lib.tokenizer import Tokenizer
from transformer_lib.training import Trainer
from transformer_lib.training.run_config import load_config
from transformer_lib.training.tasks import TranslationTask
from transformer_lib.utils import environment

VARIANTS = ("fp32", "fp32+compile", "bf16", "no-dropout", "sinusoidal", "rotary")  # the default
SHAPES = {  # variants that change the model: what each sets in the recipe's model config
    "no-dropout": {"dropout": 0.0},
    "sinusoidal": {"positional": "sinusoidal"},
    "rotary": {"positional": "rotary"},
    "4+4": {"n_layers": 4},
    "d_model-192": {"d_model": 192, "d_ff": 384},
    "d_ff-512": {"d_ff": 512},
    "4+4-d_ff-512": {"n_layers": 4, "d_ff": 512},
    "2+2-d_model-192": {"n_layers": 2, "d_model": 192, "d_ff": 384},
    "8-heads": {"n_heads": 8},
    "post-norm": {"norm_first": False},
}
BATCHES = {"batch-1024": 1024, "batch-4096": 4096}  # variants that change the task: its max_tokens
CPU = torch.device("cpu")


def make_trainer(config: dict, task: TranslationTask, variant: str) -> Trainer:
    """A Trainer with the recipe's model and optimiser settings, changed as ``variant`` says."""
    model_config = dataclasses.replace(config.model, **SHAPES.get(variant, {}))
    torch.manual_seed(config.training.seed)
    recipe = dataclasses.replace(config.training, progress=False, max_minutes=None, snapshot_minutes=())
    trainer = Trainer(Transformer(model_config), task, recipe, device=CPU)
    if "compile" in variant:
        trainer.wrapped = torch.compile(trainer.wrapped, dynamic=True)
    if variant == "bf16":
        trainer.amp.autocast = torch.autocast("cpu", dtype=torch.bfloat16)
    return trainer


def output_layer(tokens: int, d_model: int, vocab: int, dtype: torch.dtype, repeats: int) -> dict[str, float]:
    """Milliseconds of the output layer's parts for ``tokens`` target tokens, each the median of
    ``repeats``: the projection in ``dtype``, log-softmax in fp32 (the loss casts the logits)."""
    hidden, weight = torch.randn(tokens, d_model, dtype=dtype), torch.randn(vocab, d_model, dtype=dtype)
    grad = torch.randn(tokens, vocab, dtype=dtype)
    logits, upstream = torch.randn(tokens, vocab, requires_grad=True), torch.randn(tokens, vocab)
    parts = {
        "projection": lambda: F.linear(hidden, weight),  # (tokens, vocab)
        "its backward": lambda: (grad @ weight, grad.T @ hidden),  # to the hidden states, to the weight
        "log-softmax and its backward": lambda: torch.autograd.grad(logits.log_softmax(-1), logits, upstream),
    }
    return {name: 1e3 * median_seconds(run, repeats, CPU)[1] for name, run in parts.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="multi30k_de_en_cpu", help="a packaged config or a YAML path")
    parser.add_argument("--steps", type=int, default=45, help="timed steps per variant (in 3 interleaved rounds)")
    parser.add_argument("--warmup", type=int, default=8, help="untimed steps first (allocator; compilation)")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=sorted({*VARIANTS, *SHAPES, *BATCHES}))
    parser.add_argument("--json", type=Path, help="write the record to this file (and the table beside it, .txt)")
    args = parser.parse_args(argv)
    config = load_config(args.config)
    data, task_config = config.data, config.task
    env = environment(CPU)
    report = Report()
    say = report.say
    pairs = load_pairs("train", data.src, data.tgt)
    tokenizer = Tokenizer.train([s for pair in pairs for s in pair], data.vocab_size, data.tokenizer)
    encoded = encode_pairs(pairs, tokenizer)
    tasks = {  # the recipe's batches, or a variant's own
        variant: TranslationTask(encoded, [], BATCHES.get(variant, task_config.max_tokens), task_config.label_smoothing)
        for variant in args.variants
    }
    batches = {variant: task.train_batches(0)[: args.warmup + args.steps] for variant, task in tasks.items()}
    tokens = {  # target tokens in a step, the mean of its batches
        variant: sum(int((tasks[variant].make_batch(i, train=True).tgt_out != PAD_ID).sum()) for i in run) / len(run)
        for variant, run in batches.items()
    }
    say(f"{args.config}: torch {env['torch']}; {env['device']}; {torch.get_num_threads()} threads; commit "
        f"{env['git_commit'][:7]}")  # fmt: skip
    trainers = {variant: make_trainer(config, tasks[variant], variant) for variant in args.variants}
    for variant, trainer in trainers.items():
        for indices in batches[variant][: args.warmup]:
            trainer.train_step([indices])
    seconds = dict.fromkeys(trainers, 0.0)
    rounds = 3
    per_round = args.steps // rounds
    for r in range(rounds):  # interleaved: each variant's share of every part of the run
        for variant, trainer in trainers.items():
            start = time.perf_counter()
            for indices in batches[variant][args.warmup + r * per_round : args.warmup + (r + 1) * per_round]:
                trainer.train_step([indices])
            seconds[variant] += time.perf_counter() - start
    steps = rounds * per_round
    rows = []
    base = steps / seconds[args.variants[0]]
    width = max(14, *map(len, args.variants))  # a column as wide as the longest name
    say(f"\n{'variant':<{width}} {'updates/s':>9} {'vs ' + args.variants[0]:>16} {'target tokens/s':>16}")
    for variant in trainers:
        rate = steps / seconds[variant]
        row = {"config": args.config, "variant": variant, "updates_per_s": round(rate, 3)}
        rows.append({**provenance(env), **row, "target_tokens_per_s": round(rate * tokens[variant])})
        say(f"{variant:<{width}} {rate:9.2f} {rate / base:15.2f}x {rate * tokens[variant]:16.0f}")
    step_ms = 1e3 * seconds[args.variants[0]] / steps
    step_tokens = round(tokens[args.variants[0]])
    model = config.model
    say(f"\nthe output layer alone, {step_tokens} target tokens (a step's mean), d_model {model.d_model}, "
        f"vocabulary {model.vocab_size}; one {args.variants[0]} step: {step_ms:.0f} ms")  # fmt: skip
    parts = {}
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        parts[name] = output_layer(step_tokens, model.d_model, model.vocab_size, dtype, repeats=10)
        total = sum(parts[name].values())
        detail = ", ".join(f"{part} {ms:.0f}" for part, ms in parts[name].items())
        say(f"  {name}: {detail} ms: {total:.0f} ms, {100 * total / step_ms:.0f} % of that step")
    if args.json:
        report.write(args.json, env, rows, output_layer_ms=parts, step_ms=round(step_ms, 1), target_tokens=step_tokens)


if __name__ == "__main__":
    main()
