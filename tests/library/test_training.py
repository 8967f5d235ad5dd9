"""Loss, schedule, token batching and exact resumption."""

import json
import math
import random
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from transformer_lib import Transformer, TransformerConfig
from transformer_lib.batching import collate, example_size, padding_fraction, token_batches
from transformer_lib.checkpoint import FORMAT, Checkpoint, average_checkpoints, kept_weights, load_checkpoint, step_of
from transformer_lib.checkpoint import snapshots as snapshot_files
from transformer_lib.config import DecodeConfig
from transformer_lib.training import (
    TrainConfig,
    Trainer,
    cooldown_lr,
    label_smoothed_cross_entropy,
    noam_lr,
    steps_in_time,
    time_linear_lr,
)
from transformer_lib.training.run_config import load_config
from transformer_lib.training.tasks import TranslationTask
from transformer_lib.translation import load_model, translate_sentences

DATA = Path(__file__).parents[1] / "data"


def random_examples(n, seed=0, vocab=20):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, 12, (n, 2), generator=g).tolist()
    return [
        ([*torch.randint(4, vocab, (a,), generator=g).tolist(), 2], torch.randint(4, vocab, (b,), generator=g).tolist())
        for a, b in lengths
    ]


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_label_smoothing_equals_pytorch(smoothing):
    torch.manual_seed(0)
    logits = torch.randn(4, 7, 30)
    target = torch.randint(0, 30, (4, 7))
    target[0, 4:] = 0  # padding
    ours = label_smoothed_cross_entropy(logits, target, smoothing, ignore_index=0)
    theirs = F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=0, label_smoothing=smoothing)
    torch.testing.assert_close(ours, theirs)


def test_label_smoothing_hand_computed():
    # Two classes, logits equal: p = (1/2, 1/2). Loss = -log(1/2) whatever the smoothing.
    assert label_smoothed_cross_entropy(torch.zeros(1, 2), torch.tensor([1]), 0.1, ignore_index=-1) == pytest.approx(
        math.log(2)
    )


def test_schedule_values_at_known_steps():
    # Base model: d_model = 512, warmup = 4000. Peak at step 4000: 512^-0.5 * 4000^-0.5.
    peak = 512**-0.5 * 4000**-0.5
    assert noam_lr(4000, 512, 4000) == pytest.approx(peak)
    assert noam_lr(1, 512, 4000) == pytest.approx(512**-0.5 * 4000**-1.5)
    assert noam_lr(2000, 512, 4000) == pytest.approx(peak / 2)  # linear warm-up
    assert noam_lr(16000, 512, 4000) == pytest.approx(peak / 2)  # then 1/sqrt(step)
    assert peak == pytest.approx(7.0e-4, rel=0.01)


def test_time_linear_schedule_values():
    """The paper's warm-up times a straight line from 1 at the start to 0 at the budget's end."""
    peak = 128**-0.5 * 800**-0.5 * 1.2
    assert time_linear_lr(400, 0.0, 1200.0, 128, 800, 1.2) == pytest.approx(peak / 2)  # warming up
    assert time_linear_lr(800, 0.0, 1200.0, 128, 800, 1.2) == pytest.approx(peak)
    assert time_linear_lr(800, 300.0, 1200.0, 128, 800, 1.2) == pytest.approx(0.75 * peak)  # a warm-up of 5 minutes
    assert time_linear_lr(3000, 300.0, 1200.0, 128, 800, 1.2) == pytest.approx(0.75 * peak)  # no 1/sqrt(step)
    assert time_linear_lr(3000, 1200.0, 1200.0, 128, 800, 1.2) == 0.0
    assert time_linear_lr(3000, 1300.0, 1200.0, 128, 800, 1.2) == 0.0  # past the budget: never negative
    with pytest.raises(ValueError, match="falls to 0 at max_minutes"):
        TrainConfig(schedule="time_linear")
    with pytest.raises(ValueError, match="schedule must be one of \\['noam', 'time_linear', 'cooldown'\\]"):
        TrainConfig(schedule="cosine")


def test_cooldown_schedule_values():
    """The paper's schedule until the last share of the run, then a straight line to 0 at its end."""
    peak = 128**-0.5 * 800**-0.5 * 1.2
    assert cooldown_lr(800, 0.5, 128, 800, 1.2) == pytest.approx(peak)  # before the cooldown: the paper's
    assert cooldown_lr(3200, 0.8, 128, 800, 1.2) == pytest.approx(peak / 2)  # 1/sqrt(step)
    assert cooldown_lr(3200, 0.9, 128, 800, 1.2) == pytest.approx(peak / 4)  # halfway down the last fifth
    assert cooldown_lr(3200, 1.0, 128, 800, 1.2) == 0.0
    assert cooldown_lr(3200, 1.1, 128, 800, 1.2) == 0.0  # past the budget: never negative
    assert cooldown_lr(3200, 0.75, 128, 800, 1.2, share=0.5) == pytest.approx(peak / 4)
    with pytest.raises(ValueError, match="schedule cooldown falls to 0 at the run"):
        TrainConfig(schedule="cooldown")
    with pytest.raises(ValueError, match=r"cooldown must be a share of the run in \(0, 1\], got 0"):
        TrainConfig(schedule="cooldown", max_steps=10, cooldown=0)


def test_the_cooldown_schedule_counts_a_step_budget(tmp_path):
    """With max_steps and no max_minutes, step s of 6 runs at the paper's rate times (1 - s/6) / 0.5,
    capped at 1: the paper's for steps 1 to 3, then two thirds, one third and 0."""
    trainer = make_trainer(tmp_path, max_steps=6, schedule="cooldown", cooldown=0.5, warmup=2, grad_accum=1)
    rates = [r["lr"] for r in trainer.train() if "lr" in r]
    d_model = trainer.model.d_model
    expected = [noam_lr(s, d_model, 2) * min(1.0, (1 - s / 6) / 0.5) for s in range(1, 7)]
    assert rates == pytest.approx(expected)
    assert rates[2] == pytest.approx(noam_lr(3, d_model, 2)) and rates[-1] == 0.0


@pytest.mark.parametrize("max_tokens", [32, 100, 1000])
def test_token_batches_respect_the_budget_and_cover_every_example_once(max_tokens):
    examples = random_examples(500)
    batches = token_batches(examples, max_tokens, shuffle=True, seed=3)
    assert sorted(i for b in batches for i in b) == list(range(500))
    for b in batches:
        assert len(b) * max(example_size(examples[i]) for i in b) <= max_tokens
        padded = collate([examples[i] for i in b])
        assert padded.src.numel() <= max_tokens and padded.tgt_in.numel() <= max_tokens
    assert token_batches(examples, max_tokens, seed=3) == batches  # same seed, same batches
    assert token_batches(examples, max_tokens, seed=4) != batches


def test_sorted_batches_pad_less_than_random_ones():
    examples = random_examples(500)
    sorted_batches = token_batches(examples, 200, shuffle=True, seed=0)
    g = torch.Generator().manual_seed(0)
    order = torch.randperm(500, generator=g).tolist()
    random_batches = [order[i : i + len(b)] for i, b in zip(range(0, 500, 10), sorted_batches, strict=False)]
    assert padding_fraction(examples, sorted_batches) < padding_fraction(examples, random_batches)


def test_an_example_over_the_budget_is_a_clear_error():
    with pytest.raises(ValueError, match="raise max_tokens"):
        token_batches(random_examples(10), max_tokens=5)


def test_collate_shifts_the_target():
    batch = collate([([5, 6, 2], [7, 8, 9]), ([5, 2], [7])])
    assert batch.src.tolist() == [[5, 6, 2], [5, 2, 0]]
    assert batch.tgt_in.tolist() == [[1, 7, 8, 9], [1, 7, 0, 0]]
    assert batch.tgt_out.tolist() == [[7, 8, 9, 2], [7, 2, 0, 0]]
    assert batch.n_tokens == 6


def make_trainer(run_dir, **overrides):
    torch.manual_seed(0)
    model = Transformer(TransformerConfig.preset("tiny", vocab_size=20, dropout=0.1))
    settings = dict(epochs=2, warmup=5, progress=False, grad_accum=2)
    config = TrainConfig(**{**settings, **overrides})
    task = TranslationTask(random_examples(120), random_examples(20, seed=1), max_tokens=128)
    return Trainer(model, task, config, run_dir=run_dir)


def test_resume_gives_the_same_losses_as_an_uninterrupted_run(tmp_path):
    full = make_trainer(tmp_path / "full")
    losses = [r["loss"] for r in full.train() if "loss" in r]
    assert len(losses) > 8

    interrupted = make_trainer(tmp_path / "cut", max_steps=5, checkpoint_every=5)
    interrupted.train()
    resumed = make_trainer(tmp_path / "cut")
    resumed.load_state(load_checkpoint(tmp_path / "cut" / "checkpoint.pt"))
    assert resumed.position.step == 5
    resumed_losses = [r["loss"] for r in resumed.train() if "loss" in r]
    assert resumed_losses == losses[5:]  # exactly, on the CPU


def small_trainer(run_dir, **overrides):
    """A one-layer translator, d_model 16: the model of tests/data/checkpoint_v1."""
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(vocab_size=20, d_model=16, n_heads=2, n_layers=1, d_ff=32, dropout=0.1))
    config = TrainConfig(**{**dict(epochs=2, warmup=5, progress=False, grad_accum=2), **overrides})
    task = TranslationTask(random_examples(120), random_examples(20, seed=1), max_tokens=128)
    return Trainer(model, task, config, run_dir=run_dir)


def test_a_checkpoint_written_before_the_trainer_was_split_still_resumes(tmp_path):
    """tests/data/checkpoint_v1: ``small_trainer(max_steps=5, checkpoint_every=5)`` trained by the Trainer of
    b388fb0, which held its precision and its checkpoints itself, before they became parts of their own."""
    whole = [r["loss"] for r in small_trainer(tmp_path / "whole").train() if "loss" in r]
    resumed = small_trainer(tmp_path / "old")
    resumed.load_state(load_checkpoint(DATA / "checkpoint_v1" / "checkpoint.pt"))
    assert resumed.position.step == 5
    losses = [r["loss"] for r in resumed.train() if "loss" in r]
    assert len(losses) == len(whole) - 5 and losses == pytest.approx(whole[5:], rel=1e-4)  # another CPU: last digits


def test_a_checkpoint_written_by_0_3_0_still_loads_translates_and_resumes(tmp_path):
    """tests/data/checkpoint_0.3.0: the checkpoint.pt of ``train --config config.yaml`` (the file beside it,
    three steps of a 16-wide model) run by release 0.3.0 (commit acee521), before files said their format;
    next_steps.json: the next three steps' records there, resumed by 0.3.0's own Trainer on this task."""
    old = DATA / "checkpoint_0.3.0"
    saved = load_checkpoint(old / "checkpoint.pt")
    assert saved.run.direction == "de_en" and saved.training.position.step == 3
    model, tokenizer, record = load_model(old, torch.device("cpu"))
    assert record == saved.run and record.model == load_config(str(old / "config.yaml")).model
    (translation,) = translate_sentences(model, tokenizer, ["Ein Hund läuft."], DecodeConfig(beam_size=2), "cpu")
    assert isinstance(translation, str)
    config = load_config(str(old / "config.yaml"))
    resumed = Trainer(Transformer(config.model), TranslationTask(random_examples(40, vocab=120)), config.training)
    resumed.load_state(saved)
    assert resumed.position == saved.training.position
    steps = [resumed.train_step([[2 * i, 2 * i + 1]]) for i in range(3)]
    expected = json.loads((old / "next_steps.json").read_text(encoding="utf-8"))
    assert [s["step"] for s in steps] == expected["steps"] and [s["lr"] for s in steps] == expected["lr"]
    assert [s["loss"] for s in steps] == pytest.approx(expected["loss"], rel=1e-4)  # another CPU: last digits
    written = Checkpoint.of(torch.load(saved.save(tmp_path / "again.pt"), weights_only=True))
    assert written.run == saved.run and written.training.position == saved.training.position


def test_a_checkpoint_of_a_newer_format_or_with_an_entry_missing_is_one_clear_error(tmp_path):
    path = tmp_path / "future.pt"
    torch.save({"format": FORMAT + 1, "model": {}}, path)
    with pytest.raises(ValueError, match=f"checkpoint format {FORMAT + 1}, newer than this package's {FORMAT}"):
        load_checkpoint(path)
    torch.save({"model": {}, "meta": {"src": "de", "tgt": "en"}}, path)
    with pytest.raises(ValueError, match="not a complete checkpoint of this package \\(no 'model_config' entry\\)"):
        load_checkpoint(path)
    torch.save({"model": {}, "optimizer": {}, "scheduler": {}, "rng": [], "position": {"step": 1, "lap": 2}}, path)
    with pytest.raises(ValueError, match=r"not a complete checkpoint .*unexpected keyword argument 'lap'"):
        load_checkpoint(path)


def test_training_lowers_the_loss_and_writes_metrics(tmp_path):
    trainer = make_trainer(tmp_path, epochs=6)
    history = trainer.train()
    val = [r["val_loss"] for r in history if "val_loss" in r]
    assert val[-1] < val[0]
    header = (tmp_path / "metrics.csv").read_text(encoding="utf-8").splitlines()[0]
    assert header == "step,epoch,loss,lr,grad_norm,items,items_per_s,val_loss,val_ppl"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary files left


def test_bad_train_config_values():
    with pytest.raises(ValueError, match="label_smoothing must be in"):
        TranslationTask(random_examples(5), label_smoothing=1.0)
    with pytest.raises(ValueError, match="max_tokens must be a positive integer"):
        TranslationTask(random_examples(5), max_tokens=0)
    with pytest.raises(ValueError, match="epochs must be a positive integer"):
        TrainConfig(epochs=0)


def test_missing_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        load_checkpoint(tmp_path / "missing.pt")


def test_keep_last_keeps_the_newest_weights_and_averaging_is_their_mean(tmp_path):
    trainer = make_trainer(tmp_path, max_steps=8, checkpoint_every=2, keep_last=3)
    trainer.train()
    kept = kept_weights(tmp_path)
    assert [p.name for p in kept] == [f"weights-step{s:07d}.pt" for s in (4, 6, 8)]
    assert [step_of(p) for p in kept] == [4, 6, 8]
    states = [load_checkpoint(p).weights for p in kept]
    averaged = average_checkpoints(kept)
    name = "encoder.layers.0.feed_forward.linear1.weight"
    by_hand = (states[0][name] + states[1][name] + states[2][name]) / 3
    assert torch.allclose(averaged[name], by_hand, atol=1e-7)
    assert not torch.equal(averaged[name], states[-1][name])
    assert torch.equal(states[-1][name], trainer.model.state_dict()[name])
    with pytest.raises(ValueError, match="no checkpoints to average"):
        average_checkpoints([])


def test_the_tasks_fused_loss_equals_the_lessons_by_hand_loss():
    """The hot path's F.cross_entropy(label_smoothing=...) against lesson 9's formula, padding included."""
    torch.manual_seed(0)
    model = Transformer(TransformerConfig.preset("tiny", vocab_size=20))
    task = TranslationTask(random_examples(30), max_tokens=256, label_smoothing=0.1)
    batch = task.make_batch(task.train_batches(0)[0], train=True)
    fused, items = task.loss(model, batch, train=True)
    by_hand = label_smoothed_cross_entropy(model(batch.src, batch.tgt_in), batch.tgt_out, 0.1, reduction="sum")
    assert items == batch.n_tokens and (batch.tgt_out == 0).any()
    assert torch.allclose(fused, by_hand, rtol=1e-5)
    plain, _ = task.loss(model, batch, train=False)
    assert plain < fused  # the smoothed loss of an untrained model is larger than the plain one


def test_trainer_refuses_what_breaks_its_contract():
    task = TranslationTask(random_examples(5))
    with pytest.raises(TypeError, match="Task contract"):
        Trainer(Transformer(TransformerConfig.preset("tiny", vocab_size=20)), random_examples(5))
    with pytest.raises(ValueError, match="no integer d_model"):
        Trainer(torch.nn.Linear(2, 2), task)


class Delegating:
    """A task that wraps another and hands it every call (as a reader's logging wrapper would)."""

    def __init__(self, task):
        self.task = task

    def __getattr__(self, name):
        return getattr(self.task, name)


class NoLoss:
    def train_batches(self, epoch):
        return [[0]]

    def val_batches(self):
        return []

    def make_batch(self, indices, train):
        return None


def test_the_contract_is_the_methods_a_call_finds_on_every_python():
    """isinstance(task, Task) ignores __getattr__ from Python 3.12 on: a delegating wrapper must still train."""
    model = Transformer(TransformerConfig.preset("tiny", vocab_size=20))
    Trainer(model, Delegating(TranslationTask(random_examples(5))), TrainConfig(progress=False))
    with pytest.raises(TypeError, match=r"NoLoss has no loss$"):
        Trainer(model, NoLoss())


def test_pad_multiple_gives_few_shapes_within_the_budget():
    rng = random.Random(0)
    pairs = [([5] * rng.randint(1, 30), [6] * rng.randint(1, 30)) for _ in range(500)]
    task = TranslationTask(pairs, max_tokens=256, pad_multiple=8)
    shapes = set()
    for indices in task.train_batches(0):
        batch = task.make_batch(indices, train=True)
        assert batch.src.shape[1] % 8 == 0 and batch.tgt_in.shape[1] % 8 == 0
        assert batch.src.shape[0] * max(batch.src.shape[1], batch.tgt_in.shape[1]) <= 256  # padded slots count
        assert batch.n_tokens == sum(len(pairs[i][1]) + 1 for i in indices)  # the padding is not counted
        shapes.add(tuple(batch.src.shape) + tuple(batch.tgt_in.shape))
    plain = TranslationTask(pairs, max_tokens=256)
    plain_batches = [plain.make_batch(indices, train=True) for indices in plain.train_batches(0)]
    plain_shapes = {tuple(b.src.shape) + tuple(b.tgt_in.shape) for b in plain_batches}
    assert len(shapes) < len(plain_shapes) / 2


def test_a_time_budget_sets_the_progress_bars_length():
    """Under max_minutes the bar counts to the steps the budget allows (its ETA is the budget's)."""
    assert steps_in_time(done=100, elapsed=60.0, budget=1200.0) == 2000
    assert steps_in_time(done=0, elapsed=0.0, budget=1200.0) == 0  # no rate yet
    assert steps_in_time(done=100, elapsed=600.0, budget=60.0) == 100  # never fewer than done


def test_in_a_terminal_validation_is_printed_above_the_bar(capsys, monkeypatch):
    """A long run from the command line shows its validation loss as it goes (a lesson plots its history)."""
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    task = TranslationTask(random_examples(40), random_examples(10, seed=1), max_tokens=64)
    torch.manual_seed(0)
    model = Transformer(TransformerConfig.preset("tiny", vocab_size=20))
    history = Trainer(model, task, TrainConfig(max_steps=4, eval_every=2, warmup=5)).train()
    printed = capsys.readouterr().out.splitlines()
    vals = [r for r in history if "val_loss" in r]
    assert printed == [
        f"step {r['step']:,}: validation loss {r['val_loss']:.3f}, perplexity {r['val_ppl']:.2f}" for r in vals
    ]
    assert [r["step"] for r in vals] == [2, 4]


def test_a_snapshot_is_what_a_run_stopped_there_would_average(tmp_path, monkeypatch):
    """snapshot_minutes: at each mark, the mean of the kept weights, equal to a shorter run's own."""
    import transformer_lib.training.trainer as training

    settings = dict(max_steps=5, keep_last=2, checkpoint_every=1, grad_accum=1)
    timed = make_trainer(tmp_path / "timed", snapshot_minutes=(2, 3), **settings)
    monkeypatch.setattr(training.time, "monotonic", lambda: 60.0 * timed.position.step)  # a step takes a minute
    timed.train()
    monkeypatch.undo()
    snapshots = [load_checkpoint(p) for p in snapshot_files(tmp_path / "timed")]
    assert [s.snapshot.step for s in snapshots] == [2, 3]
    assert [s.snapshot.minutes for s in snapshots] == [2, 3]
    assert timed.position.seconds == 300.0
    for snapshot in snapshots:  # the same seed, stopped at the snapshot's step: its two last kept weights
        step = snapshot.snapshot.step
        short = make_trainer(tmp_path / f"short{step}", **{**settings, "max_steps": step})
        short.train()
        expected = average_checkpoints(kept_weights(short.folder.path))
        assert all(torch.equal(snapshot.weights[k], expected[k]) for k in expected)


@pytest.mark.parametrize(
    "marks, match",
    [((10, 5), "increasing order"), ((0,), "positive"), ((5, 5), "increasing"), ((5, 20), "end before max_minutes")],
)
def test_bad_snapshot_minutes_are_refused(marks, match):
    with pytest.raises(ValueError, match=match):
        TrainConfig(snapshot_minutes=marks, max_minutes=20)


def test_a_time_budget_and_its_snapshots_span_a_resume(tmp_path, monkeypatch):
    """Stopped after 3 of 5 minutes, a resumed run trains 2 more, as the uninterrupted run does."""
    import transformer_lib.training.trainer as training

    settings = dict(max_minutes=5, snapshot_minutes=(2, 4), keep_last=2, checkpoint_every=1, grad_accum=1)
    current = []
    monkeypatch.setattr(training.time, "monotonic", lambda: 60.0 * current[-1].position.step)  # a step takes a minute
    whole = make_trainer(tmp_path / "whole", **settings)
    current.append(whole)
    whole.train()
    cut = make_trainer(tmp_path / "cut", **{**settings, "max_steps": 3})
    current.append(cut)
    cut.train()
    resumed = make_trainer(tmp_path / "cut", **settings)
    resumed.load_state(load_checkpoint(tmp_path / "cut" / "checkpoint.pt"))
    assert resumed.position.seconds == 180.0
    current.append(resumed)
    resumed.train()
    assert resumed.position.step == whole.position.step == 6 and resumed.position.seconds == whole.position.seconds
    for run in ("whole", "cut"):
        assert [load_checkpoint(p).snapshot.step for p in snapshot_files(tmp_path / run)] == [2, 4]
    assert torch.equal(whole.model.state_dict()["generator.weight"], resumed.model.state_dict()["generator.weight"])


def test_in_a_log_file_progress_is_a_plain_line_a_minute(capsys, monkeypatch):
    """Where stderr is a file (a sweep's log), no redrawn bar: a line a minute, then the last one."""
    import transformer_lib.training.trainer as training

    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    clock = iter(range(0, 10_000, 25))  # each call to the clock: 25 s later
    monkeypatch.setattr(training.time, "monotonic", lambda: float(next(clock)))
    task = TranslationTask(random_examples(40), max_tokens=64)
    model = Transformer(TransformerConfig.preset("tiny", vocab_size=20))
    Trainer(model, task, TrainConfig(max_steps=6, warmup=5, eval_every=0)).train()
    err = capsys.readouterr().err
    assert "\r" not in err
    lines = err.splitlines()
    assert 2 <= len(lines) < 6 and all(line.startswith("train: ") for line in lines)
    assert lines[-1].startswith("train: 100% 6/6 [") and "loss=" in lines[-1]


def test_the_time_linear_schedule_reads_the_runs_time_across_a_resume(tmp_path, monkeypatch):
    """A step takes a minute of a 5-minute budget: the rate falls by a fifth of its peak a step, and a run
    stopped after 3 minutes and resumed sets the same rates as one that ran through."""
    import transformer_lib.training.trainer as training

    settings = dict(max_minutes=5, schedule="time_linear", warmup=2, checkpoint_every=1, grad_accum=1)
    current = []
    monkeypatch.setattr(training.time, "monotonic", lambda: 60.0 * current[-1].position.step)
    whole = make_trainer(tmp_path / "whole", **settings)
    current.append(whole)
    rates = [r["lr"] for r in whole.train() if "lr" in r]
    peak = noam_lr(2, whole.model.d_model, 2)
    # Step s's rate is set when step s - 1 ends, from the time at which step s - 1 began: 60 (s - 2) seconds.
    expected = [peak / 2, peak] + [peak * (1 - 60 * (s - 2) / 300) for s in range(3, 7)]
    assert rates == pytest.approx(expected)
    cut = make_trainer(tmp_path / "cut", **{**settings, "max_steps": 3})
    current.append(cut)
    cut.train()
    resumed = make_trainer(tmp_path / "cut", **settings)
    resumed.load_state(load_checkpoint(tmp_path / "cut" / "checkpoint.pt"))
    current.append(resumed)
    assert [r["lr"] for r in resumed.train() if "lr" in r] == pytest.approx(rates[3:])


def test_max_minutes_ends_training_as_max_steps_does(tmp_path):
    class Task:
        def train_batches(self, epoch):
            return [[0]] * 50

        def val_batches(self):
            return [[0]]

        def make_batch(self, indices, train):
            return torch.ones(2, 3)

        def loss(self, model, batch, train):
            return model(batch).sum(), 1

    model = torch.nn.Linear(3, 3)
    model.d_model = 4
    trainer = Trainer(model, Task(), TrainConfig(epochs=5, max_minutes=1e-9, progress=False), run_dir=tmp_path)
    history = trainer.train()
    assert trainer.position.step == 1  # the budget is spent after the first step
    assert "val_loss" in history[-1] and (tmp_path / "checkpoint.pt").is_file()


def test_half_precision_keeps_tied_weights_as_one_tensor():
    model = Transformer(TransformerConfig(vocab_size=50, d_model=16, n_heads=2, n_layers=1, d_ff=32))
    half = Checkpoint(model.state_dict()).half().weights
    assert half["src_embed.weight"].dtype == torch.float16
    assert half["src_embed.weight"] is half["generator.weight"] is half["tgt_embed.weight"]
    assert torch.equal(half["generator.weight"].float(), model.generator.weight.detach().half().float())


def test_a_run_folder_is_written_by_the_main_process_only(tmp_path, capsys):
    """Every file of a run folder comes from RunFolder; under torchrun the other processes write nothing."""
    from transformer_lib.checkpoint import RunFolder

    model = Transformer(TransformerConfig(vocab_size=50, d_model=16, n_heads=2, n_layers=1, d_ff=32))
    for is_main in (False, True):
        folder = RunFolder(tmp_path / "run", is_main=is_main)
        folder.start({"model": {"d_model": 16}}, {"device": "cpu"}, b"a tokenizer")
        folder.note("trained 3 steps")
        folder.save_hypotheses("val", ["a dog runs .", "two men"])
        folder.save_scores({"steps": 3})
        folder.save_curve({"points": []})
        folder.save_evaluated(Checkpoint(model.state_dict()))
        folder.save_evaluated(Checkpoint(model.state_dict()), half=True)
        if not is_main:
            assert not (tmp_path / "run").exists() and capsys.readouterr().err == ""
    run = tmp_path / "run"
    assert sorted(p.name for p in run.iterdir()) == [
        "checkpoint_averaged.pt", "config.yaml", "curve.json", "environment.json", "log.txt", "model_fp16.pt",
        "scores.json", "tokenizer.model", "val.hyp.txt",
    ]  # fmt: skip
    assert capsys.readouterr().err == "trained 3 steps\n" == (run / "log.txt").read_text(encoding="utf-8")
    assert (run / "val.hyp.txt").read_text(encoding="utf-8") == "a dog runs .\ntwo men\n"
    assert (run / "tokenizer.model").read_bytes() == b"a tokenizer"
    assert load_checkpoint(run / "model_fp16.pt").weights["generator.weight"].dtype == torch.float16
