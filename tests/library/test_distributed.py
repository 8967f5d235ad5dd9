"""Data-parallel training on the CPU (gloo): N processes compute what one process computes."""

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from test_training import random_examples

from transformer_lib import TrainConfig, Trainer, Transformer, TransformerConfig, TranslationTask
from transformer_lib.checkpoint import load_checkpoint
from transformer_lib.training import distributed

pytestmark = pytest.mark.slow  # tens of seconds: started early by `pytest -n 2` (conftest.py)


def train(run_dir, grad_accum, max_steps=None):
    torch.manual_seed(0)
    model = Transformer(TransformerConfig.preset("tiny", vocab_size=20, dropout=0.0))
    task = TranslationTask(
        random_examples(100), random_examples(20, seed=1), max_tokens=128
    )  # 9 batches: one idle step
    config = TrainConfig(epochs=3, warmup=5, grad_accum=grad_accum, max_steps=max_steps, progress=False)
    trainer = Trainer(model, task, config, run_dir=run_dir)
    trainer.train()
    return trainer


def worker(rank, world, store, run_dir):
    torch.set_num_threads(1)
    # A file, not a TCP port, to meet at: a port found free can be taken by another test before
    # the processes bind it (the two-process test failed that way now and then).
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    train(run_dir, grad_accum=1)
    distributed.finish()


def test_two_processes_train_the_same_weights_as_one_with_twice_the_accumulation(tmp_path):
    one = train(tmp_path / "one", grad_accum=2)
    mp.spawn(worker, args=(2, str(tmp_path / "store"), str(tmp_path / "two")), nprocs=2)
    two = load_checkpoint(tmp_path / "two" / "checkpoint.pt")
    assert two.training.position.step == one.position.step > 10
    worst = 0.0
    for name, weight in one.model.state_dict().items():
        if name.endswith("k_proj.bias"):
            # A key bias adds the same q.b to every score of a query, which the softmax ignores: its
            # true gradient is 0, its computed one rounding noise (~1e-10), and Adam (eps 1e-9) turns
            # noise into steps of the learning rate's size. It changes no output, so it is skipped.
            continue
        worst = max(worst, (two.weights[name] - weight).abs().max().item())
    # Summed in another order, gradients differ in their last bits, and Adam's division by
    # sqrt(v) + 1e-9 enlarges that where a gradient is near 0: agreement to 1e-3 (weights ~0.1).
    assert worst < 1e-3, worst
    logged = list(csv.DictReader(open(tmp_path / "two" / "metrics.csv", encoding="utf-8")))
    steps_two = [r for r in logged if r["loss"]]
    steps_one = [r for r in one.history if "loss" in r]
    for key in ("loss", "grad_norm"):  # the same loss and the same gradient (before Adam) at every step
        assert [float(r[key]) for r in steps_two] == pytest.approx([r[key] for r in steps_one], rel=1e-4), key
    assert len(two.training.rng) == 2  # every process's random state, for an exact resume
    # The validation loss is the same too: each process scores half the batches and they add up.
    val_one = [r["val_loss"] for r in one.history if "val_loss" in r]
    val_two = [float(r["val_loss"]) for r in logged if r["val_loss"]]
    assert val_two == pytest.approx(val_one, rel=1e-4)


def test_torchrun_trains_from_the_command_line(mirror, tmp_path):
    """The README's command, on two CPU processes: one run folder, written by the main process."""
    run_dir = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[2])}
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
        "-m", "transformer_lib", "train", "--config", "smoke", "--run-dir", str(run_dir), "--device", "cpu",
    ]  # fmt: skip
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    environment = (run_dir / "environment.json").read_text(encoding="utf-8")
    assert '"processes": 2' in environment
    assert (run_dir / "scores.json").is_file() and (run_dir / "val.hyp.txt").is_file()
    state = load_checkpoint(run_dir / "checkpoint.pt")
    assert 0 < state.training.position.step <= 20 and len(state.training.rng) == 2


def test_cuda_graphs_compile_the_training_steps_alone_and_only_on_a_gpu(monkeypatch):
    """``cuda_graphs``: the steps in reduce-overhead mode (CUDA graphs), validation not graphed, a CPU untouched."""
    compiled = []
    monkeypatch.setattr(torch, "compile", lambda m, **kw: compiled.append(kw) or ("compiled", kw.get("mode")))
    model = torch.nn.Linear(2, 2)
    graphs, both = TrainConfig(cuda_graphs=True), TrainConfig(compile=True, cuda_graphs=True)
    assert distributed.wrap(model, torch.device("cpu"), both, 1) is model
    assert compiled == []
    assert distributed.wrap(model, torch.device("cuda"), graphs, 1) == ("compiled", "reduce-overhead")
    assert distributed.wrap(model, torch.device("cuda"), TrainConfig(compile=True), 1) == ("compiled", None)
    assert all(kw["dynamic"] for kw in compiled)  # token batches change shape: one graph per shape, not a compile
