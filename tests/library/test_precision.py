"""training.precision: chosen by the device, refused in one line where it cannot run, fp16's loss scaling.

A CPU cannot train in fp16 here, so the loss scaler's behaviour is checked with PyTorch's CPU
GradScaler put in the Trainer's place: a forced overflow skips the step and lowers the scale, and
a resumed run continues with the scale it had.
"""

import math

import pytest
import torch
from test_training import Delegating, random_examples

from transformer_lib import Transformer, TransformerConfig, load_checkpoint
from transformer_lib.cli import main
from transformer_lib.training import PRECISIONS, TrainConfig, Trainer, resolve_precision
from transformer_lib.training.run_config import CONFIG_DIR, load_config
from transformer_lib.training.tasks import TranslationTask


@pytest.mark.parametrize(
    "precision, device, bf16, expected",
    [
        ("auto", "cuda", True, "bf16"),  # an H100, an A100
        ("auto", "cuda", False, "fp16"),  # a T4, a V100
        ("auto", "cpu", False, "fp32"),
        ("bf16", "cuda", True, "bf16"),
        ("bf16", "cpu", False, "fp32"),  # a GPU recipe tried on a laptop: fp32, as before
        ("fp16", "cuda", True, "fp16"),
        ("fp16", "cuda", False, "fp16"),
        ("fp32", "cuda", True, "fp32"),
        ("fp32", "cpu", False, "fp32"),
    ],
)
def test_the_precision_follows_the_device(precision, device, bf16, expected):
    assert resolve_precision(precision, device, bf16) == expected


def test_what_cannot_run_is_one_line():
    with pytest.raises(ValueError, match="precision fp16 needs a CUDA GPU"):
        resolve_precision("fp16", "cpu")
    with pytest.raises(ValueError, match="this GPU does not compute in bf16: use precision fp16"):
        resolve_precision("bf16", "cuda", bf16_supported=False)
    with pytest.raises(ValueError, match="precision must be one of \\['auto', 'bf16', 'fp16', 'fp32'\\], got 'fp8'"):
        TrainConfig(precision="fp8")


def packaged():
    return sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))


@pytest.mark.parametrize("name", packaged())
def test_packaged_configs_resolve_on_every_device(name):
    precision = load_config(name).training.precision
    assert precision in PRECISIONS
    assert resolve_precision(precision, "cpu") == "fp32"
    if precision == "auto":  # the GPU recipes: fp16 with loss scaling where there is no bf16
        assert resolve_precision(precision, "cuda", bf16_supported=False) == "fp16"
        assert resolve_precision(precision, "cuda", bf16_supported=True) == "bf16"


def test_the_gpu_recipes_choose_by_device():
    autos = [n for n in packaged() if load_config(n).training.precision == "auto"]
    assert {"multi30k_de_en_small", "multi30k_en_de_base"} <= set(autos)


@pytest.mark.parametrize("bf16, expected", [("true", "bf16"), ("false", "fp32")])
def test_the_old_bf16_key_still_reads(tmp_path, bf16, expected):
    """Earlier configs and the run folders under results/ say bf16: true or false."""
    path = tmp_path / "old.yaml"
    path.write_text(f"model:\n  preset: tiny\ntraining:\n  bf16: {bf16}\n", encoding="utf-8")
    assert load_config(str(path)).training.precision == expected


def test_bf16_and_precision_together_are_refused(tmp_path):
    path = tmp_path / "both.yaml"
    path.write_text("model:\n  preset: tiny\ntraining:\n  bf16: true\n  precision: auto\n", encoding="utf-8")
    with pytest.raises(ValueError, match="give precision only"):
        load_config(str(path))


def test_fp16_on_a_cpu_is_refused_before_anything_is_written(tmp_path, capsys):
    config = tmp_path / "fp16.yaml"
    config.write_text(
        (CONFIG_DIR / "smoke.yaml")
        .read_text(encoding="utf-8")
        .replace("training:\n", "training:\n  precision: fp16\n"),
        encoding="utf-8",
    )
    run_dir = tmp_path / "run"
    assert main(["train", "--config", str(config), "--run-dir", str(run_dir), "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: precision fp16 needs a CUDA GPU") and len(err.splitlines()) == 1
    assert not run_dir.exists()


class OverflowAt(Delegating):
    """A translation task whose loss is infinite at one training call: gradients overflow there."""

    def __init__(self, task, call):
        super().__init__(task)
        self.call, self.calls = call, 0

    def loss(self, model, batch, train):
        loss, count = self.task.loss(model, batch, train)
        if train:
            self.calls += 1
            if self.calls == self.call:
                loss = loss * math.inf
        return loss, count


def scaled_trainer(task, scale=2.0**10):
    """A Trainer whose loss scaler is on, as fp16 turns it on on a GPU (PyTorch's CPU scaler here)."""
    torch.manual_seed(0)
    model = Transformer(TransformerConfig.preset("tiny", vocab_size=20))
    trainer = Trainer(model, task, TrainConfig(epochs=1, warmup=5, progress=False))
    trainer.amp.scaler = torch.amp.GradScaler("cpu", init_scale=scale, growth_interval=1000)
    return trainer


def weights(trainer):
    return [p.detach().clone() for p in trainer.model.parameters()]


def test_an_overflow_skips_the_step_and_lowers_the_scale():
    task = OverflowAt(TranslationTask(random_examples(40), max_tokens=64), call=2)
    trainer = scaled_trainer(task)
    batches = task.train_batches(0)
    trainer.train_step(batches[:1])
    before = weights(trainer)
    trainer.train_step(batches[1:2])  # the infinite loss
    assert all(torch.equal(a, b) for a, b in zip(before, weights(trainer), strict=True)), (
        "a skipped step changes nothing"
    )
    assert trainer.amp.scaler.get_scale() == 2.0**9 and trainer.amp.skipped_steps == 1
    trainer.train_step(batches[2:3])
    after = weights(trainer)
    assert all(torch.isfinite(w).all() for w in after)
    assert not all(torch.equal(a, b) for a, b in zip(before, after, strict=True)), "the next step trains"
    assert trainer.amp.skipped_steps == 1


def test_the_scale_and_the_weights_resume_exactly(tmp_path):
    def task():
        return OverflowAt(TranslationTask(random_examples(40), max_tokens=64), call=2)

    straight = scaled_trainer(task())
    batches = straight.task.train_batches(0)
    for i in range(4):
        straight.train_step(batches[i : i + 1])

    first = scaled_trainer(task())
    for i in range(2):
        first.train_step(batches[i : i + 1])
    path = first.checkpoint().save(tmp_path / "checkpoint.pt")
    rest = task()
    rest.calls = 2  # the overflow is behind it, as in the first run
    resumed = scaled_trainer(rest, scale=1.0)  # a different scale, which the checkpoint replaces
    resumed.load_state(load_checkpoint(path))
    assert resumed.amp.scaler.get_scale() == 2.0**9
    for i in range(2, 4):
        resumed.train_step(batches[i : i + 1])
    assert resumed.amp.scaler.state_dict() == straight.amp.scaler.state_dict()
    assert all(torch.equal(a, b) for a, b in zip(weights(straight), weights(resumed), strict=True))
