"""The benchmark scripts run and measure what they claim (their timings are not asserted)."""

import json

import pytest
import torch

from book_tools.benchmarks.kv_cache import main
from transformer_lib import TransformerLibError
from transformer_lib.benchmarks.kv_cache import benchmark


def test_kv_cache_benchmark_row():
    row = benchmark("tiny", batch_size=2, tokens=8, device=torch.device("cpu"), vocab_size=100)
    assert row["preset"] == "tiny" and row["batch"] == 2
    assert 0 < row["generated"] < 8  # at most 8 tokens, the last of them <eos>
    assert row["no_cache_s"] > 0 and row["cache_s"] > 0 and row["static_s"] > 0
    assert row["cuda_graph"] is False  # a CPU records no graph: static_s measures the fixed buffers alone


def test_kv_cache_benchmark_prints_a_table(capsys):
    main(["--presets", "tiny", "--batch-sizes", "1", "--tokens", "6", "--device", "cpu"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[2].split()[:6] == ["model", "batch", "generated", "no", "cache", "(s)"]
    assert lines[2].split()[-3:] == ["static", "(s)", "speed-up"]
    assert lines[3].split()[:2] == ["tiny", "1"] and lines[3].endswith("x")


def test_decode_speed_translates_the_same_with_cuda_graph(mirror, tmp_path, capsys):
    """With --cuda-graph every beam size gets a second row, decoded over the static cache: the same BLEU."""
    from book_tools.benchmarks.decode_speed import main as decode_speed

    out = tmp_path / "decode.json"
    decode_speed(["--limit", "12", "--repeats", "1", "--beam-sizes", "1", "3", "--cuda-graph", "--device", "cpu",
                  "--json", str(out)])  # fmt: skip
    rows = json.loads(out.read_text())["rows"]
    assert [(r["beam_size"], r["cuda_graph"]) for r in rows] == [(1, False), (1, True), (3, False), (3, True)]
    assert rows[0]["bleu"] == rows[1]["bleu"] and rows[2]["bleu"] == rows[3]["bleu"]
    assert "graph" in capsys.readouterr().out


def test_training_flops_match_pytorchs_flop_counter():
    from torch.utils.flop_counter import FlopCounterMode

    from book_tools.benchmarks.training_speed import training_flops
    from transformer_lib import Transformer, TransformerConfig, keep_attention_weights

    config = TransformerConfig.preset("tiny", vocab_size=50, dropout=0.0)
    model = Transformer(config)
    keep_attention_weights(model)  # attention as plain matmuls, which the counter sees
    src, tgt = torch.randint(4, 50, (3, 7)), torch.randint(4, 50, (3, 5))
    with FlopCounterMode(display=False) as counter:
        model(src, tgt).square().mean().backward()
    assert counter.get_total_flops() == training_flops(config, batch=3, src_len=7, tgt_len=5)


def test_training_speed_benchmark_runs_on_cpu(mirror, capsys, tmp_path):
    from book_tools.benchmarks.training_speed import main as speed_main

    out = tmp_path / "results" / "speed.json"
    args = ["--presets", "tiny", "--steps", "2", "--warmup", "1", "--max-tokens", "512", "--vocab-size", "500"]
    speed_main([*args, "--json", str(out)])
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("tiny")]
    assert [(r[2], r[3]) for r in rows] == [("ours", "fp32"), ("ours", "fp32+by-hand"), ("nn.Transformer", "fp32")]
    assert all(r[1] == "512" and float(r[4]) > 0 for r in rows)
    record = json.loads(out.read_text(encoding="utf-8"))  # the same rows, for lesson 12
    assert all(r["device"].startswith("cpu") and r["max_tokens"] == 512 and r["commit"] for r in record["rows"])
    assert [(r["model"], r["variant"]) for r in record["rows"]] == [(r[2], r[3]) for r in rows]
    assert [round(r["tokens_per_s"]) for r in record["rows"]] == [int(r[4]) for r in rows]


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")  # nn.Transformer's inference path
def test_the_benchmarks_nn_transformer_computes_our_model():
    from book_tools.benchmarks.training_speed import TorchTransformer
    from transformer_lib import PAD_ID, Transformer, TransformerConfig

    config = TransformerConfig.preset("tiny", vocab_size=50, dropout=0.1)
    torch.manual_seed(0)
    ours = Transformer(config).eval()
    torch.manual_seed(0)
    theirs = TorchTransformer(config).eval()
    assert sum(p.numel() for p in theirs.parameters()) == sum(p.numel() for p in ours.parameters())
    assert all(m.p == 0.1 for m in theirs.modules() if isinstance(m, torch.nn.Dropout))
    src, tgt = torch.randint(4, 50, (3, 7)), torch.randint(4, 50, (3, 5))
    src[0, 5:], tgt[1, 3:] = PAD_ID, PAD_ID
    keep = tgt != PAD_ID
    with torch.no_grad():
        assert torch.allclose(theirs(src, tgt)[keep], ours(src, tgt)[keep], atol=1e-5)


def test_attention_cost_measures_the_full_matrix_and_its_absence():
    """By hand, one call holds the (n, n) scores and their softmax; the fused kernel holds neither."""
    from transformer_lib.benchmarks.attention_cost import peak_memory_mb

    n, heads = 1024, 4
    two_matrices_mib = 2 * heads * n * n * 4 / 2**20  # float32 scores and weights: 32 MiB
    assert 0.8 * two_matrices_mib < peak_memory_mb("by hand", n, heads) < 1.5 * two_matrices_mib
    assert peak_memory_mb("fused", n, heads) < 0.25 * two_matrices_mib
    with pytest.raises(TransformerLibError, match="unknown kernel 'flash'; choose one of by hand, fused, tiled"):
        peak_memory_mb("flash", n)


def test_cpu_speed_times_each_part_of_the_output_layer():
    from book_tools.benchmarks.cpu_speed import output_layer

    parts = output_layer(tokens=64, d_model=16, vocab=100, dtype=torch.bfloat16, repeats=1)
    assert list(parts) == ["projection", "its backward", "log-softmax and its backward"]
    assert all(ms > 0 for ms in parts.values())


def test_cpu_beam_choice_needs_a_gain_in_the_mean_and_on_every_model():
    from transformer_lib.benchmarks.beam_settings import choose

    recipe = [40.0, 41.0, 40.5]
    assert choose({(5, 0.6): recipe, (8, 1.0): [40.3, 41.2, 40.8]}) == (8, 1.0)  # +0.27, every model
    assert choose({(5, 0.6): recipe, (8, 1.0): [40.1, 41.1, 40.6]}) == (5, 0.6)  # +0.1: under the margin
    assert choose({(5, 0.6): recipe, (8, 1.0): [41.5, 41.5, 40.4]}) == (5, 0.6)  # one model lost
    assert choose({(5, 0.6): recipe, (3, 1.0): [40.5, 41.5, 41.0], (8, 1.0): [40.3, 41.2, 40.8]}) == (3, 1.0)
    grid = {(5, 0.6): [40.1, 41.1, 40.6], (5, 1.4): recipe}  # another recipe, alpha 1.4, and 0.6 better by 0.1
    assert choose(grid, recipe=(5, 1.4)) == (5, 1.4)  # under the margin: the recipe's own stays
    assert choose({**grid, (5, 2.2): [40.3, 41.2, 40.8]}, recipe=(5, 1.4)) == (5, 2.2)


def test_length_limit_counts_the_translations_that_reached_it():
    from book_tools.benchmarks import shipped_translator
    from book_tools.benchmarks.length_limit import translate_counting
    from transformer_lib.config import DecodeConfig
    from transformer_lib.translation import load_model, translate_sentences

    model, tokenizer, _ = load_model(shipped_translator("de_en"), torch.device("cpu"))
    sources = ["Ein Hund rennt.", "Zwei Männer spielen Fußball auf einer grünen Wiese.", "Eine Frau liest."]
    for beam_size in (1, 3):
        free = DecodeConfig(beam_size=beam_size)
        translations, reached = translate_counting(model, tokenizer, sources, free)
        assert translations == translate_sentences(model, tokenizer, sources, free, torch.device("cpu"))
        assert reached == 0  # photo descriptions end well inside source + 25
        # a lone word and one token to spare: the model says more than that (as "Dogs dog.")
        words = ["Hund", "Frau", "Fahrrad"]
        cut = DecodeConfig(beam_size=beam_size, max_extra=1)
        assert translate_counting(model, tokenizer, words, cut)[1] == len(words)


def test_cpu_average_window_must_beat_the_recipes_by_the_margin():
    from book_tools.benchmarks.checkpoint_average import choose

    assert choose({1: 39.0, 2: 40.0, 4: 40.5, 10: 40.9}) == 10  # +0.4
    assert choose({1: 39.0, 2: 40.0, 4: 40.5, 10: 40.7}) == 4  # +0.2: under the margin
    assert choose({1: 39.0, 2: 40.9, 4: 40.5, 10: 40.4}) == 2


def test_a_report_writes_what_it_printed_beside_its_record(tmp_path, capsys):
    from book_tools.benchmarks import Report

    report = Report()
    report.say("a table")
    report.say()
    report.say("chosen: 4")
    report.write(tmp_path / "record.json", {"device": "cpu"}, [{"n": 4}], chosen=4)
    assert capsys.readouterr().out == "a table\n\nchosen: 4\n"
    assert (tmp_path / "record.txt").read_text(encoding="utf-8") == "a table\n\nchosen: 4\n"
    assert json.loads((tmp_path / "record.json").read_text(encoding="utf-8")) == {
        "environment": {"device": "cpu"},
        "chosen": 4,
        "rows": [{"n": 4}],
    }


def test_cpu_speed_batch_variants_train_batches_of_their_own_size(mirror, tmp_path):
    """A batch variant must time its own batches: half or twice the recipe's target tokens a step."""
    from book_tools.benchmarks import cpu_speed

    out = tmp_path / "speed.json"
    variants = ["fp32", "batch-1024", "batch-4096"]
    cpu_speed.main(["--config", "smoke", "--steps", "3", "--warmup", "1", "--variants", *variants,
                                  "--json", str(out)])  # fmt: skip
    rows = {row["variant"]: row for row in json.loads(out.read_text(encoding="utf-8"))["rows"]}
    tokens = {variant: row["target_tokens_per_s"] / row["updates_per_s"] for variant, row in rows.items()}
    assert 1.8 < tokens["fp32"] / tokens["batch-1024"] < 2.2
    assert 1.8 < tokens["batch-4096"] / tokens["fp32"] < 2.2


def test_page_speed_says_in_one_line_what_it_needs(tmp_path, capsys):
    """No built site in the folder given: one line naming what to install or build, no traceback."""
    from book_tools.benchmarks.page_speed import main as page_speed

    assert page_speed(["--site", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: needs ") and err.count("\n") == 1, err


@pytest.mark.parametrize(
    ("args", "says"),
    [(["--precisions", "fp8"], "invalid choice: 'fp8'"), (["--limit", "5", "--json", "x.json"], "without --limit")],
)
def test_onnx_precision_refuses_bad_arguments_before_any_work(args, says, capsys, monkeypatch, tmp_path):
    """An unknown precision, or a partial run written as the record the translator page reads: one line, at once."""
    from book_tools.benchmarks.onnx_precision import main as onnx_precision

    monkeypatch.chdir(tmp_path)  # were the check to fail, nothing is written into the checkout
    with pytest.raises(SystemExit) as exit_:
        onnx_precision(args)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err, err


def test_confidence_refuses_a_partial_record(capsys, monkeypatch, tmp_path):
    """The site build takes the page's warning thresholds from the record: a --limit run cannot write it."""
    from book_tools.benchmarks.confidence import main as confidence

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        confidence(["--limit", "5", "--json", "x.json"])
    assert exit_.value.code == 2
    assert "without --limit" in capsys.readouterr().err


def test_packed_self_attention_computes_our_outputs_and_gradients():
    """Packing Q, K and V into one projection changes the number of matrix products, not the function."""
    import copy

    from book_tools.benchmarks.training_speed import PackedSelfAttention, pack_qkv
    from transformer_lib import PAD_ID, Transformer, TransformerConfig

    torch.manual_seed(0)
    reference = Transformer(TransformerConfig.preset("tiny", vocab_size=50, dropout=0.0))
    packed = pack_qkv(copy.deepcopy(reference))
    assert sum(p.numel() for p in packed.parameters()) == sum(p.numel() for p in reference.parameters())
    src, tgt = torch.randint(4, 50, (3, 7)), torch.randint(4, 50, (3, 5))
    src[0, 5:], tgt[1, 3:] = PAD_ID, PAD_ID
    keep = tgt != PAD_ID
    outputs = []
    for model in (reference, packed):
        out = model(src, tgt)[keep]
        out.square().sum().backward()
        outputs.append(out)
    assert torch.allclose(outputs[1], outputs[0], atol=1e-5)
    for ref_layer, layer in zip(reference.decoder.layers, packed.decoder.layers, strict=True):
        assert isinstance(layer.self_attn, PackedSelfAttention)
        ref = ref_layer.self_attn
        expected = torch.cat([ref.q_proj.weight.grad, ref.k_proj.weight.grad, ref.v_proj.weight.grad])
        assert torch.allclose(layer.self_attn.qkv.weight.grad, expected, atol=1e-5)
        assert torch.allclose(layer.cross_attn.q_proj.weight.grad, ref_layer.cross_attn.q_proj.weight.grad, atol=1e-5)


@pytest.mark.parametrize("packed", [False, True])
def test_causal_self_attention_without_a_mask_computes_every_real_positions_outputs_and_gradients(packed):
    """is_causal=True instead of the causal-and-padding mask: only padded target positions change."""
    import copy

    from book_tools.benchmarks.training_speed import causal_decoder, pack_qkv
    from transformer_lib import PAD_ID, Transformer, TransformerConfig

    torch.manual_seed(0)
    reference = Transformer(TransformerConfig.preset("tiny", vocab_size=50, dropout=0.0))
    if packed:
        pack_qkv(reference)
    causal = causal_decoder(copy.deepcopy(reference))
    src, tgt = torch.randint(4, 50, (3, 7)), torch.randint(4, 50, (3, 6))
    src[0, 5:], tgt[1, 3:], tgt[2, 5:] = PAD_ID, PAD_ID, PAD_ID
    keep = tgt != PAD_ID
    outputs = []
    for model in (reference, causal):
        logits = model(src, tgt)
        logits[keep].square().sum().backward()
        outputs.append(logits)
    assert torch.allclose(outputs[1][keep], outputs[0][keep], atol=1e-5)
    assert not torch.allclose(
        outputs[1][~keep], outputs[0][~keep], atol=1e-3
    )  # the padded ones differ: a test that can fail
    for ref, new in zip(reference.parameters(), causal.parameters(), strict=True):
        assert torch.allclose(new.grad, ref.grad, atol=1e-5)


def test_the_step_without_host_syncs_makes_the_trainers_updates(mirror):
    """Three steps of ``+nosync`` leave the weights the Trainer's own three steps leave."""
    from transformer_lib import Transformer, TransformerConfig
    from transformer_lib.training import TrainConfig, Trainer
    from transformer_lib.training.tasks import TranslationTask

    examples = [([5 + i % 7, 6, 7 + i % 5, 3], [8, 9 + i % 4, 10]) for i in range(24)]
    config = TransformerConfig.preset("tiny", vocab_size=30, dropout=0.0)
    weights = []
    for nosync in (False, True):
        torch.manual_seed(0)
        trainer = Trainer(Transformer(config), TranslationTask(examples, max_tokens=40), TrainConfig(progress=False))
        for indices in trainer.task.train_batches(0)[:3]:
            trainer.launch_step([indices]) if nosync else trainer.train_step([indices])
        weights.append(torch.cat([p.detach().flatten() for p in trainer.model.parameters()]))
    assert trainer.position.step == 3
    assert torch.allclose(weights[1], weights[0], atol=1e-6)
    assert not torch.allclose(weights[0], torch.cat([p.flatten() for p in Transformer(config).parameters()]))


def test_a_variant_is_a_precision_and_known_modifiers():
    import argparse

    from book_tools.benchmarks.training_speed import checked_variant

    assert checked_variant("bf16+nosync+packed+compile") == "bf16+nosync+packed+compile"
    for bad in ("bf16+turbo", "int8", "bf16+compile+compile"):
        with pytest.raises(argparse.ArgumentTypeError, match="write a precision"):
            checked_variant(bad)


def test_the_speed_benchmark_times_the_new_variants_on_cpu(mirror, capsys):
    from book_tools.benchmarks.training_speed import main as speed_main

    args = ["--presets", "tiny", "--steps", "2", "--warmup", "1", "--max-tokens", "512", "--vocab-size", "500"]
    speed_main([*args, "--variants", "fp32+nosync+packed", "fp32+causal", "bf16+graphs", "--repeat-batches", "1"])
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("tiny")]
    # bf16 and graphs need a GPU; nn.Transformer has no packed or causal variant of its own
    assert [(r[2], r[3]) for r in rows] == [("ours", "fp32+nosync+packed"), ("ours", "fp32+causal")]
