"""Training throughput of our Transformer against ``torch.nn.Transformer``, for the GPU runs.

    python -m transformer_lib.benchmarks.training_speed [--presets small base] [--steps 30]
        [--max-tokens 8192 32768] [--variants fp32 bf16 bf16+compile ...] [--peak-tflops 989]
        [--json results/speed.json]

Both models get the same configuration, the same Multi30k de→en token batches and the same
training step, the :class:`~transformer_lib.training.trainer.Trainer`'s (label-smoothed loss, clipping,
Adam); ``nn.Transformer`` gets our embeddings, positions and tied output layer
around it, so that only the encoder and decoder stacks differ. Each variant runs ``--warmup``
untimed steps, then ``--steps`` timed ones. Reported per variant: target tokens per second, median
step time, peak GPU memory, and MFU: model FLOPs per second (:func:`training_flops`, counted on the
padded batches, as the hardware computes them) over the GPU's dense bf16 peak.

Variants: ``fp32`` (TF32 matmuls off), ``bf16`` (autocast), ``fp16`` (autocast with the
loss scaling of ``training.precision: fp16``, what a GPU without bf16 runs), ``+compile`` (``torch.compile``),
``+by-hand`` (our attention computed by hand, as in lesson 4, instead of PyTorch's fused
``scaled_dot_product_attention``; not applicable to ``nn.Transformer``), ``+buckets`` (lengths
padded up to a multiple of 8: a few batch shapes instead of hundreds; tokens/s counts real target
tokens only, so the extra padding costs the variant what it costs in training). On a CPU the bf16, fp16 and
compile variants are skipped; use the CPU only to check that the script runs. ``--json`` also
writes the table, one row per measurement with the device, torch version and commit, for lesson
12 to show.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor, nn

from transformer_lib.attention import causal_mask, keep_attention_weights
from transformer_lib.batching import encode_pairs
from transformer_lib.benchmarks import provenance, write_record
from transformer_lib.data import load_pairs
from transformer_lib.model import Transformer, TransformerConfig
from transformer_lib.reference import torch_transformer
from transformer_lib.special_tokens import PAD_ID
from transformer_lib.tokenizer import Tokenizer
from transformer_lib.training import TrainConfig, Trainer
from transformer_lib.training.tasks import TranslationTask
from transformer_lib.utils import environment

# Dense bf16 tensor-core peaks (TFLOP/s) from the vendors' data sheets, by device-name fragment.
PEAK_BF16_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L4": 121.0, "A10G": 70.0, "T4": 65.0}
VARIANTS = (
    "fp32",
    "fp32+by-hand",
    "bf16",
    "bf16+by-hand",
    "bf16+buckets",
    "bf16+compile",
    "bf16+compile+buckets",
    "fp16",
    "fp16+compile",
)
HALF = ("bf16", "fp16")  # the variants' autocast precisions: on a CUDA GPU only
BUCKET = 8  # "+buckets": lengths padded up to a multiple of 8, so that batches come in few shapes
MODELS = ("ours", "nn.Transformer")


class TorchTransformer(nn.Module):
    """``nn.Transformer`` with our embeddings, positions and tied output layer: the same model as
    :class:`~transformer_lib.model.Transformer`, with PyTorch's encoder and decoder stacks."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        self.d_model = config.d_model  # what the Trainer's warm-up schedule scales with
        ours = Transformer(config)
        self.embed, self.positional, self.generator = ours.src_embed, ours.positional, ours.generator  # tied
        self.stacks = torch_transformer(ours)  # our layers and weights in PyTorch's modules, built without dropout
        for module in self.stacks.modules():
            if isinstance(module, nn.Dropout):
                module.p = config.dropout

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        """src (batch, src_len), tgt (batch, tgt_len) ids -> logits (batch, tgt_len, vocab_size)."""
        src_pad, tgt_pad = src == PAD_ID, tgt == PAD_ID  # True marks padding, nn.Transformer's convention
        hidden = self.stacks(
            self.positional(self.embed(src)),
            self.positional(self.embed(tgt)),
            tgt_mask=~causal_mask(tgt.shape[1], tgt.device)[0, 0],  # True marks a forbidden position
            tgt_is_causal=True,  # PyTorch's hint: spares comparing the mask with a causal one on every call
            src_key_padding_mask=src_pad,
            tgt_key_padding_mask=tgt_pad,
            memory_key_padding_mask=src_pad,
        )
        return self.generator(hidden)


def training_flops(config: TransformerConfig, batch: int, src_len: int, tgt_len: int) -> float:
    """Matmul FLOPs of one training step (forward + backward = 3 x forward) on a padded batch.

    Per source token and encoder layer: Q, K, V, O projections 8 d^2, scores and weighted sum
    4 S d, feed-forward 4 d d_ff. Per target token and decoder layer: self-attention 8 d^2 + 4 T d,
    cross-attention queries and output 4 d^2 + 4 S d, feed-forward 4 d d_ff; plus 4 d^2 per source
    token for the cross-attention keys and values. The output layer: 2 d V per target token.
    Attention is counted in full, as fused kernels with a mask compute it.
    """
    d, f, n, vocab = config.d_model, config.d_ff, config.n_layers, config.vocab_size
    encoder = src_len * (8 * d * d + 4 * src_len * d + 4 * d * f)
    decoder = tgt_len * (12 * d * d + 4 * tgt_len * d + 4 * src_len * d + 4 * d * f) + src_len * 4 * d * d
    forward = batch * (n * (encoder + decoder) + tgt_len * 2 * d * vocab)
    return 3.0 * forward


def peak_tflops(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((peak for fragment, peak in PEAK_BF16_TFLOPS.items() if fragment in name), None)


def encoded_pairs(vocab_size: int) -> tuple[list[tuple[list[int], list[int]]], int]:
    """Multi30k de→en's training pairs as ids (a tokenizer trained on them), and the vocabulary size."""
    pairs = load_pairs("train", "de", "en")
    tokenizer = Tokenizer.train([s for pair in pairs for s in pair], vocab_size=vocab_size)
    return encode_pairs(pairs, tokenizer), tokenizer.vocab_size


def make_batches(vocab_size: int, max_tokens: int, count: int) -> tuple[TranslationTask, list[list[int]], int]:
    """The translation task of Multi30k de→en, ``count`` of its token batches, and the vocabulary size."""
    examples, vocab = encoded_pairs(vocab_size)
    task = TranslationTask(examples, max_tokens=max_tokens)
    return task, task.train_batches(0)[:count], vocab


def run_variant(
    model_name: str,
    variant: str,
    config: TransformerConfig,
    examples: Sequence[tuple[list[int], list[int]]],
    max_tokens: int,
    steps: int,
    warmup: int,
    device,
) -> dict:
    """Train ``warmup`` + ``steps`` steps of one model and variant with the :class:`Trainer`'s own
    step, on the first token batches of ``examples``; time the last ``steps``."""
    task = TranslationTask(examples, max_tokens=max_tokens, pad_multiple=BUCKET if "buckets" in variant else 1)
    batches = task.train_batches(0)[:steps]
    torch.manual_seed(0)
    model = Transformer(config) if model_name == "ours" else TorchTransformer(config)
    if "by-hand" in variant:
        keep_attention_weights(model)
    precision = next((half for half in HALF if half in variant), "fp32")
    recipe = TrainConfig(precision=precision, compile="compile" in variant, progress=False)
    trainer = Trainer(model, task, config=recipe, device=device)
    cuda = device.type == "cuda"
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)

    def step(indices: Sequence[int]) -> None:
        trainer.train_step([indices])

    for i in range(warmup):
        step(batches[i % len(batches)])
    times = []
    for batch in batches:
        if cuda:
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        step(batch)
        if cuda:
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    seconds = sum(times)
    made = [task.make_batch(indices, train=True) for indices in batches]
    flops = sum(training_flops(config, *b.src.shape, b.tgt_in.shape[1]) for b in made)
    return {
        "model": model_name,
        "variant": variant,
        "tokens_per_s": sum(b.n_tokens for b in made) / seconds,
        "step_ms": 1000 * statistics.median(times),
        "peak_mem_gb": torch.cuda.max_memory_allocated(device) / 1e9 if cuda else None,
        "tflops": flops / seconds / 1e12,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=["small", "base"])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--steps", type=int, default=30, help="timed steps per variant")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps first (compilation, allocator)")
    parser.add_argument("--max-tokens", type=int, nargs="+", default=[8192], help="token slots per batch")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--peak-tflops", type=float, help="the device's dense bf16 peak (default: from its name)")
    parser.add_argument("--json", type=Path, help="also write the rows to this file (e.g. results/speed.json)")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    env = environment(device)
    peak = args.peak_tflops or peak_tflops(device)
    examples, vocab_size = encoded_pairs(args.vocab_size)
    print(f"training steps on Multi30k de→en; torch {env['torch']}; {env['device']}; commit {env['git_commit'][:7]}")
    print(f"MFU against a dense bf16 peak of {peak} TFLOP/s\n" if peak else "no known peak: MFU not reported\n")
    print(
        f"{'preset':<6} {'tokens':>6} {'model':<15} {'variant':<13} {'tokens/s':>9} {'step ms':>8} "
        f"{'peak GB':>8} {'TFLOP/s':>8} {'MFU':>6}"
    )
    rows = []
    for max_tokens in args.max_tokens:
        for preset in args.presets:
            config = TransformerConfig.preset(preset, vocab_size=vocab_size)
            for model_name in args.models:
                for variant in args.variants:
                    if device.type != "cuda" and (any(h in variant for h in HALF) or "compile" in variant):
                        continue
                    if model_name != "ours" and "by-hand" in variant:
                        continue
                    r = run_variant(model_name, variant, config, examples, max_tokens, args.steps, args.warmup, device)
                    mfu = r["tflops"] / peak if peak else None
                    rows.append(
                        {
                            **provenance(env),
                            "preset": preset,
                            "max_tokens": max_tokens,
                            **r,
                            "mfu": mfu,
                        }
                    )
                    memory = f"{r['peak_mem_gb']:.2f}" if r["peak_mem_gb"] is not None else "-"
                    print(
                        f"{preset:<6} {max_tokens:>6} {model_name:<15} {variant:<13} {r['tokens_per_s']:>9.0f} "
                        f"{r['step_ms']:>8.1f} {memory:>8} {r['tflops']:>8.2f} "
                        f"{f'{100 * mfu:.1f}%' if mfu is not None else '-':>6}",
                        flush=True,
                    )
                    if args.json:  # after every row: a run cut short keeps what it measured
                        write_record(args.json, env, rows, peak_tflops=peak, steps=args.steps)
    if args.json:
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
