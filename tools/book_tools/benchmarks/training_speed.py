"""Training throughput of our Transformer against ``torch.nn.Transformer``, for the GPU runs.

    python -m book_tools.benchmarks.training_speed [--presets small base] [--steps 30]
        [--max-tokens 8192 32768] [--variants fp32 bf16 bf16+compile ...] [--peak-tflops 989]
        [--repeat-batches N] [--json results/speed.json]

Both models get the same configuration, the same Multi30k de→en token batches and the same
training step, the :class:`~transformer_lib.training.trainer.Trainer`'s (label-smoothed loss, clipping,
Adam); ``nn.Transformer`` gets our embeddings, positions and tied output layer
around it, so that only the encoder and decoder stacks differ. Each variant runs ``--warmup``
untimed steps, then ``--steps`` timed ones, timed as a whole (one synchronisation before and one
after, so that a step that needs none can overlap the next). Reported per variant: target tokens
per second, the mean step time, peak GPU memory, and MFU: model FLOPs per second
(:func:`training_flops`, counted on the padded batches, as the hardware computes them) over the
GPU's dense bf16 peak.

A variant is a precision and any of the modifiers after it, joined by ``+``: ``fp32`` (TF32 matmuls
off), ``bf16`` (autocast), ``fp16`` (autocast with the loss scaling of ``training.precision: fp16``,
what a GPU without bf16 runs); ``+compile`` (``torch.compile``), ``+graphs`` (the Trainer's
``cuda_graphs``: ``torch.compile`` in ``reduce-overhead`` mode, whose CUDA graphs replay a shape's
kernels without launching each), ``+by-hand`` (our attention computed by hand, as in lesson 4,
instead of PyTorch's fused ``scaled_dot_product_attention``; ours only), ``+packed`` (each
self-attention's Q, K and V from one projection, one matrix product instead of three; ours only:
``nn.Transformer`` packs them already), ``+nosync`` (the Trainer's step without reading its loss
back, so the CPU prepares the next step while the GPU computes this one; the Trainer itself uploads
batches from pinned memory and counts tokens on the GPU, the two other waits this variant removed
when speed round 4 measured it), ``+causal`` (each decoder self-attention asks the fused kernel
for causal attention, ``is_causal=True``, instead of passing the causal-and-padding mask, so that
it may take the flash kernel; ours only), ``+buckets`` (lengths padded up to a multiple of 8: a few batch
shapes instead of hundreds; tokens/s counts real target tokens only, so the extra padding costs the
variant what it costs in training). Each modifier computes the same losses as the plain step
(``tests/tools/test_benchmarks.py`` checks them on a CPU). On a CPU the bf16, fp16, compile and graphs
variants are skipped; use the CPU only to check that the script runs. ``--repeat-batches N`` cycles
the timed steps over the first N batches: the steady state of a variant whose first step of a shape
costs more (CUDA graphs record each shape once). ``--json`` also writes the table, one row per
measurement with the device, torch version and commit, for lesson 12 to show."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from book_tools.benchmarks import provenance, write_record
from transformer_lib.attention import MultiHeadAttention, causal_mask, keep_attention_weights
from transformer_lib.batching import encode_pairs
from transformer_lib.config import PAD_ID, PRESETS, TransformerConfig
from transformer_lib.data import load_pairs
from transformer_lib.errors import InvalidValue
from transformer_lib.model import Transformer
from transformer_lib.reference import torch_transformer
from transformer_lib.tokenizer import Tokenizer
from transformer_lib.training import TrainConfig, Trainer
from transformer_lib.training.run_config import load_config
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
PRECISIONS = ("fp32", "bf16", "fp16")
MODIFIERS = ("by-hand", "buckets", "causal", "compile", "graphs", "nosync", "packed")
OURS_ONLY = {"by-hand", "causal", "packed"}  # changes to our attention, which nn.Transformer does not have
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


def checked_variant(name: str) -> str:
    """``name`` if it is a precision followed by ``+modifiers`` (each once); else one clear error."""
    precision, *modifiers = name.split("+")
    unknown = [m for m in modifiers if m not in MODIFIERS]
    if precision not in PRECISIONS or unknown or len(set(modifiers)) < len(modifiers):
        raise argparse.ArgumentTypeError(
            f"{name!r} is not a variant: write a precision ({', '.join(PRECISIONS)}) and any of "
            f"+{', +'.join(MODIFIERS)}, each once, e.g. bf16+nosync+compile"
        )
    return name


def modifiers(name: str) -> set[str]:
    return set(name.split("+")[1:])


class PackedSelfAttention(nn.Module):
    """Self-attention whose queries, keys and values come from one ``(3 d_model, d_model)`` projection:
    one matrix product (and one in each backward) instead of three. Built from a
    :class:`~transformer_lib.attention.MultiHeadAttention` and its weights, it computes the same function.
    """

    def __init__(self, attention: MultiHeadAttention) -> None:
        super().__init__()
        if attention.rotary or attention.n_kv_heads != attention.n_heads:
            raise InvalidValue(
                "packed Q, K, V: only the paper's attention (no rotary, as many key-value heads as heads)"
            )
        self.d_model, self.d_head, self.dropout = attention.d_model, attention.d_head, attention.dropout
        projections = (attention.q_proj, attention.k_proj, attention.v_proj)
        self.qkv = nn.Linear(self.d_model, 3 * self.d_model)
        with torch.no_grad():
            self.qkv.weight.copy_(torch.cat([p.weight for p in projections]))
            self.qkv.bias.copy_(torch.cat([p.bias for p in projections]))
        self.out_proj = attention.out_proj
        self.causal = False  # see CausalSelfAttention

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None, cache=None) -> Tensor:
        """query = key = value (batch, seq, d_model) -> (batch, seq, d_model); training only (no cache)."""
        batch, seq, _ = query.shape
        qkv = self.qkv(query).view(batch, seq, 3, -1, self.d_head)  # (batch, seq, 3, heads, d_head)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each (batch, heads, seq, d_head)
        dropout_p = self.dropout if self.training else 0.0
        mask = None if self.causal else mask
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=self.causal)
        return self.out_proj(out.transpose(1, 2).reshape(batch, seq, self.d_model))


class CausalSelfAttention(nn.Module):
    """A decoder self-attention that drops its mask and asks the fused kernel for causal attention
    (``is_causal=True``), which a flash kernel computes without reading a mask.

    Exact wherever the loss looks: padding comes last in a target, so the keys before a real
    position are all real, and the padding mask hides nothing from it. Only the outputs at padded
    positions change, and the loss ignores them. Built from a
    :class:`~transformer_lib.attention.MultiHeadAttention`, whose projections it uses.
    """

    def __init__(self, attention: MultiHeadAttention) -> None:
        super().__init__()
        if attention.rotary:
            raise InvalidValue("causal self-attention: only attention without rotary positions")
        self.attention = attention

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None, cache=None) -> Tensor:
        """query = key = value (batch, seq, d_model) -> (batch, seq, d_model); training only (no cache)."""
        a = self.attention
        q, k, v = a.split_heads(a.q_proj(query)), a.split_heads(a.k_proj(key)), a.split_heads(a.v_proj(value))
        dropout_p = a.dropout if self.training else 0.0
        grouped = a.n_kv_heads != a.n_heads
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True, enable_gqa=grouped)
        return a.out_proj(a.merge_heads(out))  # (batch, seq, d_model)


def causal_decoder(model: Transformer) -> Transformer:
    """Every decoder layer's self-attention made causal without a mask (:class:`CausalSelfAttention`), in place."""
    for layer in model.decoder.layers:
        if isinstance(layer.self_attn, PackedSelfAttention):
            layer.self_attn.causal = True
        else:
            layer.self_attn = CausalSelfAttention(layer.self_attn)
    return model


def pack_qkv(model: Transformer) -> Transformer:
    """Every encoder and decoder layer's self-attention packed (:class:`PackedSelfAttention`), in place."""
    for layer in [*model.encoder.layers, *model.decoder.layers]:
        layer.self_attn = PackedSelfAttention(layer.self_attn)
    return model


def model_config(name: str, vocab_size: int) -> TransformerConfig:
    """A preset's model (``base``), or a packaged run config's (``multi30k_de_en_tiny``: the shipped translator)."""
    if name in PRESETS:
        return TransformerConfig.preset(name, vocab_size=vocab_size)
    return load_config(name).model.replace(vocab_size=vocab_size)


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
    repeat_batches: int | None = None,
) -> dict:
    """Train ``warmup`` + ``steps`` steps of one model and variant on the first token batches of
    ``examples`` (cycling over the first ``repeat_batches`` of them, if given); time the last ``steps``."""
    mods = modifiers(variant)
    task = TranslationTask(examples, max_tokens=max_tokens, pad_multiple=BUCKET if "buckets" in mods else 1)
    batches = task.train_batches(0)[: repeat_batches or steps]
    timed = [batches[i % len(batches)] for i in range(steps)]
    if {"compile", "graphs"} & mods:
        torch._dynamo.reset()  # each model compiled afresh: recompiling for a new model counts against a limit
    torch.manual_seed(0)
    model = Transformer(config) if model_name == "ours" else TorchTransformer(config)
    if "by-hand" in mods:
        keep_attention_weights(model)
    if "packed" in mods:
        pack_qkv(model)
    if "causal" in mods:
        causal_decoder(model)
    precision = next((half for half in HALF if variant.startswith(half)), "fp32")
    recipe = TrainConfig(precision=precision, compile="compile" in mods, cuda_graphs="graphs" in mods, progress=False)
    trainer = Trainer(model, task, config=recipe, device=device)
    cuda = device.type == "cuda"
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32

    def step(indices: Sequence[int]) -> None:
        if "nosync" in mods:
            trainer.launch_step([indices])
        else:
            trainer.train_step([indices])

    for i in range(warmup):
        step(batches[i % len(batches)])
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    for indices in timed:
        step(indices)
    if cuda:
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - start
    made = [task.make_batch(indices, train=True) for indices in timed]
    flops = sum(training_flops(config, *b.src.shape, b.tgt_in.shape[1]) for b in made)
    return {
        "model": model_name,
        "variant": variant,
        "tokens_per_s": sum(b.n_tokens for b in made) / seconds,
        "step_ms": 1000 * seconds / steps,
        "peak_mem_gb": torch.cuda.max_memory_allocated(device) / 1e9 if cuda else None,
        "tflops": flops / seconds / 1e12,
        "distinct_batches": len(batches),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--presets", nargs="+", default=["small", "base"], help="presets or packaged configs (multi30k_de_en_tiny)"
    )
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), type=checked_variant, metavar="VARIANT")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--steps", type=int, default=30, help="timed steps per variant")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps first (compilation, allocator)")
    parser.add_argument("--max-tokens", type=int, nargs="+", default=[8192], help="token slots per batch")
    parser.add_argument("--repeat-batches", type=int, metavar="N", help="cycle the timed steps over N batches")
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
    width = max(6, *map(len, args.presets))  # the preset column, as wide as the longest name
    print(
        f"{'preset':<{width}} {'tokens':>6} {'model':<15} {'variant':<26} {'tokens/s':>9} {'step ms':>8} "
        f"{'peak GB':>8} {'TFLOP/s':>8} {'MFU':>6}"
    )
    rows = []
    for max_tokens in args.max_tokens:
        for preset in args.presets:
            config = model_config(preset, vocab_size)
            for model_name in args.models:
                for variant in args.variants:
                    on_gpu_only = variant.startswith(HALF) or {"compile", "graphs"} & modifiers(variant)
                    if (device.type != "cuda" and on_gpu_only) or (
                        model_name != "ours" and OURS_ONLY & modifiers(variant)
                    ):
                        continue
                    try:
                        r = run_variant(
                            model_name,
                            variant,
                            config,
                            examples,
                            max_tokens,
                            args.steps,
                            args.warmup,
                            device,
                            args.repeat_batches,
                        )
                    except RuntimeError as error:  # out of memory, a failed compile: the other variants still run
                        row = f"{preset:<{width}} {max_tokens:>6} {model_name:<15} {variant:<26}"
                        print(f"{row} failed: {str(error)[:160]}")
                        continue
                    finally:
                        if device.type == "cuda":
                            torch.cuda.empty_cache()
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
                        f"{preset:<{width}} {max_tokens:>6} {model_name:<15} {variant:<26} {r['tokens_per_s']:>9.0f} "
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
