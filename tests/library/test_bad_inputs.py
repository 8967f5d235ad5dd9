"""Bad input gets one clear line, a non-zero exit and nothing written; never a traceback."""

import dataclasses
import os
import signal

import pytest
import torch
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_training import Delegating, random_examples

from transformer_lib import (
    Interrupted,
    MultiHeadAttention,
    TrainConfig,
    Trainer,
    Transformer,
    TransformerConfig,
    TransformerLibError,
    TranslationTask,
)
from transformer_lib.checkpoint import load_checkpoint
from transformer_lib.cli import main
from transformer_lib.training.run_config import SECTIONS, load_config


def train_cli(tmp_path, capsys, text, *extra):
    config = tmp_path / "bad.yaml"
    config.write_text(text, encoding="utf-8")
    run_dir = tmp_path / "run"
    code = main(["train", "--config", str(config), "--run-dir", str(run_dir), "--device", "cpu", *extra])
    err = capsys.readouterr().err.strip().splitlines()
    return code, err, run_dir


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("training:\n  clip_grad: -1\n", "clip_grad must be positive, got -1"),  # gradient ascent, once
        ("model:\n  preset: tiny\n  norm_first: 'no'\n", "norm_first must be true or false, got 'no'"),
        ("model:\n  tie_embeddings: 'no'\n", "tie_embeddings must be true or false"),
        ("data:\n  train_limit: -5\n", "train_limit must be at least 1, got -5"),
        ("training:\n  checkpoint_every: -1\n", "checkpoint_every must be at least 0"),
        ("training:\n  eval_every: -3\n", "eval_every must be at least 0"),
        ("evaluation:\n  average_last: -1\n", "average_last must be at least 0"),
        ("evaluation:\n  limit: 0\n", "limit must be at least 1"),
        ("evaluation:\n  splits: val\n", "splits must be a list of strings, got 'val'"),
        ("training:\n  snapshot_minutes: [5, x]\n", "snapshot_minutes must be a list of numbers, got [5, 'x']"),
        ("model:\n  dropout: high\n", "dropout must be a number, got 'high'"),
        ("training:\n  seed: abc\n", "seed must be an integer, got 'abc'"),
        ("training:\n  lr_factor: fast\n", "lr_factor must be a number, got 'fast'"),
        ("training:\n  adam_eps: -1.0\n", "adam_eps must be at least 0"),
        ("data:\n  tokenizer: word\n", "tokenizer must be 'bpe' or 'unigram'"),
        ("data:\n  src: de\n  tgt: de\n", "src and tgt must be two languages"),
        ("model:\n  pad_id: 5\n", "unknown key(s) ['pad_id'] in section 'model'"),
        ("model:\n  preset: tiny\n  d_model: 65\n", "d_model=65 must be divisible by n_heads=4"),
        ("data: [\n", "is not valid YAML at line"),
        ("- a\n- b\n", "must hold a mapping of sections"),
        ("training: 5\n", "section 'training' in"),
    ],
)
def test_a_bad_config_is_one_line_and_creates_nothing(tmp_path, capsys, text, message):
    code, err, run_dir = train_cli(tmp_path, capsys, text)
    assert code == 2
    assert len(err) == 1 and message in err[0], err
    assert not run_dir.exists()


def test_exponent_floats_without_a_dot_are_numbers(tmp_path):
    """PyYAML follows YAML 1.1, where ``1e-9`` is a string; a user writing it means the number."""
    path = tmp_path / "eps.yaml"
    path.write_text("training:\n  adam_eps: 1e-9\n  lr_factor: 2E0\n", encoding="utf-8")
    training = load_config(str(path)).training
    assert training.adam_eps == 1e-9 and training.lr_factor == 2.0


@pytest.mark.parametrize(
    ("device", "message"),
    [("gpu", "unknown device 'gpu'"), ("cuda", "no CUDA GPU")],
)
def test_a_device_that_is_not_here_is_one_line(tmp_path, capsys, device, message):
    if device == "cuda" and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    code = main(["train", "--config", "smoke", "--run-dir", str(tmp_path / "run"), "--device", device])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0], err
    assert not (tmp_path / "run").exists()


def test_resume_with_nothing_to_resume_creates_nothing(tmp_path, capsys):
    code = main(["train", "--config", "smoke", "--run-dir", str(tmp_path / "run"), "--resume", "--device", "cpu"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "no checkpoint at" in err[0], err
    assert not (tmp_path / "run").exists()


def test_the_python_api_validates_where_values_are_set():
    for d_model, n_heads in ((64, 0), (0, 4), (64, -4)):
        with pytest.raises(TransformerLibError, match="must be a positive integer"):
            MultiHeadAttention(d_model, n_heads)
    with pytest.raises(TransformerLibError, match="dropout must be a number"):
        TransformerConfig(vocab_size=50, dropout="0.1")
    with pytest.raises(TransformerLibError, match="d_model must be even"):
        TransformerConfig(vocab_size=50, d_model=5, n_heads=1)


class InterruptAt(Delegating):
    """A translation task that sends this process SIGINT (Ctrl-C) during a given step."""

    def __init__(self, task, step):
        super().__init__(task)
        self.step, self.calls = step, 0

    def loss(self, model, batch, train):
        if train:
            self.calls += 1
            if self.calls == self.step:
                os.kill(os.getpid(), signal.SIGINT)
        return self.task.loss(model, batch, train)


def make_trainer(task, run_dir=None):
    torch.manual_seed(0)
    model = Transformer(TransformerConfig.preset("tiny", vocab_size=20, dropout=0.1))
    return Trainer(model, task, TrainConfig(epochs=2, warmup=5, progress=False), run_dir=run_dir)


def test_ctrl_c_stops_at_the_end_of_the_step_with_a_checkpoint_that_resumes_exactly(tmp_path):
    task = TranslationTask(random_examples(60), random_examples(10, seed=1), max_tokens=128)
    straight = [r["loss"] for r in make_trainer(task).train() if "loss" in r]
    interrupted = make_trainer(InterruptAt(task, step=3), run_dir=tmp_path)
    before = signal.getsignal(signal.SIGINT)  # Python's default, or SIG_IGN in a background job (`pytest &`)
    with pytest.raises(Interrupted, match=r"stopped at step 3; checkpoint saved in .*--resume"):
        interrupted.train()
    assert signal.getsignal(signal.SIGINT) is before  # handlers restored
    resumed = make_trainer(task)
    resumed.load_state(load_checkpoint(tmp_path / "checkpoint.pt"))
    assert resumed.position.step == 3
    assert [r["loss"] for r in resumed.train() if "loss" in r] == straight[3:]


values = st.one_of(
    st.integers(-3, 10**6), st.floats(allow_nan=True), st.booleans(), st.none(), st.text(max_size=8),
    st.lists(st.integers(-2, 5), max_size=3), st.sampled_from(["val", "tiny", "base", "rotary", "de", "en"]),
)  # fmt: skip


def section_strategy(name, cls):
    fields = [f.name for f in dataclasses.fields(cls)] if cls else ["preset", "d_model", "dropout", "positional"]
    return st.dictionaries(st.sampled_from([*fields, "typo"]), values, max_size=3)


configs = st.fixed_dictionaries({}, optional={name: section_strategy(name, cls) for name, cls in SECTIONS.items()})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(config=configs)
def test_random_configs_load_or_fail_with_the_packages_one_line_error(tmp_path, config):
    path = tmp_path / "random.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    try:
        load_config(str(path))
    except TransformerLibError as exc:
        assert "\n" not in str(exc)


def test_the_by_hand_and_fused_attention_agree_on_a_query_with_no_key():
    from transformer_lib import scaled_dot_product_attention

    q, k, v = torch.randn(1, 1, 2, 4), torch.randn(1, 1, 3, 4), torch.randn(1, 1, 3, 4)
    mask = torch.tensor([[True, True, False], [False, False, False]])  # the second query sees nothing
    by_hand, weights = scaled_dot_product_attention(q, k, v, mask)
    fused = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(by_hand, fused)
    assert torch.equal(weights[..., 1, :], torch.zeros(1, 1, 3))


def test_a_vocabulary_too_large_for_the_text_is_one_line():
    from transformer_lib import Tokenizer

    with pytest.raises(TransformerLibError, match="cannot train a vocabulary of 5000 on this text"):
        Tokenizer.train(["a small text", "with few words"], vocab_size=5000)


def test_a_file_that_is_not_a_checkpoint_is_one_line(tmp_path, capsys):
    fake = tmp_path / "notes.pt"
    fake.write_text("not a checkpoint", encoding="utf-8")
    assert main(["evaluate", "--checkpoint", str(fake), "--device", "cpu"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "is not a readable checkpoint of this package" in line
    pickled = tmp_path / "pickled.pt"
    torch.save({"model": Transformer}, pickled)  # a pickle that a weights-only load refuses
    assert main(["evaluate", "--checkpoint", str(pickled), "--device", "cpu"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "holds Python objects" in line and "weights_only" not in line
    bare = tmp_path / "bare.pt"
    torch.save({"model": {"w": torch.ones(2)}}, bare)  # readable, but not from the train command
    assert main(["evaluate", "--checkpoint", str(bare), "--device", "cpu"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "has no run record" in line


@pytest.fixture(scope="module")
def tiny_model():
    torch.manual_seed(0)
    return Transformer(TransformerConfig.preset("tiny", vocab_size=30)).eval()


tensors = st.builds(
    lambda dims, dtype, low, high, seed: torch.randint(
        low, high, dims, generator=torch.Generator().manual_seed(seed)
    ).to(dtype),
    dims=st.lists(st.integers(0, 4), min_size=1, max_size=3).map(tuple),
    dtype=st.sampled_from([torch.long, torch.int32, torch.float32, torch.bool]),
    low=st.integers(-3, 5),
    high=st.integers(6, 40),
    seed=st.integers(0, 1000),
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(src=tensors, tgt=tensors)
def test_random_token_tensors_work_or_fail_with_the_packages_one_line_error(tiny_model, src, tgt):
    try:
        with torch.no_grad():
            logits = tiny_model(src, tgt)
    except TransformerLibError as exc:
        assert "\n" not in str(exc)
    else:
        assert logits.shape == (*tgt.shape, 30) and not logits.isnan().any()


def test_sigterm_from_a_scheduler_also_stops_with_a_checkpoint(tmp_path):
    class TermAt(InterruptAt):
        def loss(self, model, batch, train):
            if train and self.calls + 1 == self.step:
                os.kill(os.getpid(), signal.SIGTERM)
                self.calls += 1
                return self.task.loss(model, batch, train)
            return super().loss(model, batch, train)

    task = TranslationTask(random_examples(60), random_examples(10, seed=1), max_tokens=128)
    trainer = make_trainer(TermAt(task, step=2), run_dir=tmp_path)
    with pytest.raises(Interrupted, match="stopped at step 2"):
        trainer.train()
    assert load_checkpoint(tmp_path / "checkpoint.pt").training.position.step == 2


def test_a_write_killed_midway_leaves_nothing_after_the_next_start(tmp_path):
    (tmp_path / ".checkpoint.pt.abc123.part").write_bytes(b"half a checkpoint")
    make_trainer(TranslationTask(random_examples(10)), run_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("section", "name"),
    [("model:\n  preset: tiny\n  max_len: 8", "model.max_len"), ("task:\n  max_tokens: 8", "task.max_tokens")],
)
def test_sentences_longer_than_the_model_allows_are_refused_before_anything_is_written(
    mirror, tmp_path, capsys, section, name
):
    code, err, run_dir = train_cli(tmp_path, capsys, f"data:\n  vocab_size: 500\n  train_limit: 300\n{section}\n")
    assert code == 2 and len(err) == 1 and f"more than {name}=8: raise {name} to at least" in err[0], err
    assert not run_dir.exists()


def test_score_of_a_file_that_is_not_text_is_one_line(tmp_path, capsys):
    """A checkpoint given where the translations go (an easy slip: both live in the run folder)."""
    wrong = tmp_path / "checkpoint.pt"
    wrong.write_bytes(b"PK\x03\x04" + bytes(range(128, 256)))
    code = main(["score", str(wrong), "--split", "val", "--tgt", "en"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "is not UTF-8 text" in err[0], err
