"""The command line end to end with the smoke config (Multi30k mirror): train, evaluate, translate."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from conftest import run_cli
from transformer_lib import TransformerConfig, checkpoint
from transformer_lib.checkpoint import model_file
from transformer_lib.cli import main
from transformer_lib.config import DecodeConfig
from transformer_lib.metrics import moses_bleu, sacrebleu_score
from transformer_lib.training.run_config import CONFIG_DIR, load_config

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow  # tens of seconds: started early by `pytest -n 2` (conftest.py)


@pytest.fixture(scope="module")
def smoke_run(mirror, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("runs") / "smoke"
    result = run_cli("train", "--config", "smoke", "--run-dir", str(run_dir), "--device", "cpu")
    assert result.returncode == 0, result.stderr
    return run_dir


def test_train_writes_a_complete_run_folder(smoke_run):
    names = {p.name for p in smoke_run.iterdir()}
    assert {
        "config.yaml",
        "environment.json",
        "tokenizer.model",
        "metrics.csv",
        "log.txt",
        "checkpoint.pt",
        "scores.json",
        "val.hyp.txt",
        "checkpoint_averaged.pt",
    } <= names
    env = json.loads((smoke_run / "environment.json").read_text(encoding="utf-8"))
    assert {"torch", "device", "git_commit", "python"} <= set(env)
    scores = json.loads((smoke_run / "scores.json").read_text(encoding="utf-8"))
    assert scores["steps"] == 20 and "bleu_tokenized_lowercase" in scores["splits"]["val"]
    assert scores["averaged"] == ["weights-step0000010.pt", "weights-step0000020.pt"]
    assert len((smoke_run / "val.hyp.txt").read_text(encoding="utf-8").splitlines()) == 50


def test_the_run_folders_config_repeats_the_run(smoke_run):
    given, written = load_config("smoke"), load_config(str(smoke_run / "config.yaml"))
    for section in ("data", "model", "task", "training", "decoding", "evaluation"):
        assert getattr(written, section) == getattr(given, section), section


def test_evaluate_and_translate(smoke_run):
    checkpoint = str(smoke_run / "checkpoint.pt")
    result = run_cli(
        "evaluate", "--checkpoint", checkpoint, "--split", "test_2016_flickr", "--limit", "30", "--device", "cpu"
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["sentences"] == 30
    # Without flags, the run's own decoding settings (the smoke config's beam of 2), as in scores.json.
    assert (
        json.loads(result.stdout)["decoding"]
        == json.loads((smoke_run / "scores.json").read_text(encoding="utf-8"))["splits"]["val"]["decoding"]
    )
    assert json.loads(result.stdout)["decoding"]["beam_size"] == 2
    result = run_cli(
        "translate",
        "--checkpoint",
        checkpoint,
        "--beam",
        "1",
        "--device",
        "cpu",
        stdin="Ein Hund läuft.\nZwei Männer.\n",
    )
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 2


def test_every_command_that_reads_a_model_takes_its_run_folder(smoke_run, tmp_path):
    """A folder means the model its scores measured (the averaged one, where the run averaged)."""
    sentences = "Ein Hund läuft.\nZwei Männer.\n"
    by_file = run_cli("translate", "--checkpoint", str(model_file(smoke_run)), "--device", "cpu", stdin=sentences)
    by_folder = run_cli("translate", "--checkpoint", str(smoke_run), "--device", "cpu", stdin=sentences)
    assert by_folder.returncode == 0, by_folder.stderr
    assert by_folder.stdout == by_file.stdout and len(by_folder.stdout.splitlines()) == 2
    expected = checkpoint.AVERAGED if (smoke_run / checkpoint.AVERAGED).exists() else checkpoint.CHECKPOINT
    assert model_file(smoke_run) == smoke_run / expected
    empty = run_cli("evaluate", "--checkpoint", str(tmp_path), "--limit", "1", "--device", "cpu")
    assert empty.returncode == 2 and empty.stderr.strip().startswith(f"error: no checkpoint in the folder {tmp_path}")


def test_a_run_record_is_read_and_written_in_one_place():
    """The committed translators' records read back as typed values, and write back unchanged."""
    for path in sorted(ROOT.glob("translators/*_*.model_fp16.pt"))[:2]:
        saved = checkpoint.load_checkpoint(path)
        record = saved.run
        assert path.name.startswith(record.direction) and isinstance(record.decoding, DecodeConfig)
        raw = torch.load(path, map_location="cpu", weights_only=True)
        assert record.model == TransformerConfig(**raw["model_config"]) and record.tokenizer == raw["tokenizer"]
        written = saved.entries()
        assert written.keys() - raw.keys() == {"format"} and written["model_config"] == raw["model_config"]
        assert checkpoint.Checkpoint.of(written).run == record


def test_translate_keeps_blank_lines_and_skips_only_what_it_cannot_read(smoke_run):
    checkpoint = str(smoke_run / "checkpoint.pt")
    too_long = " ".join(["Hund"] * 1100)  # more tokens than the model's 1024 positions
    result = run_cli("translate", "--checkpoint", checkpoint, "--beam", "1", "--device", "cpu",
                 stdin=f"Ein Hund läuft.\n\n   \n{too_long}\nZwei Männer.\n")  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("\n")[:-1]
    assert len(lines) == 5 and lines[1] == lines[2] == lines[3] == "" and lines[0] and lines[4]
    assert "sentence 4: " in result.stderr and "left untranslated" in result.stderr
    bad_bytes = subprocess.run(
        [sys.executable, "-m", "transformer_lib", "translate", "--checkpoint", checkpoint, "--device", "cpu"],
        input=b"Ein Hund.\n\xff\xfe kaputt\n", capture_output=True, timeout=300,
    )  # fmt: skip
    assert bad_bytes.returncode == 2
    assert bad_bytes.stderr.decode().strip().splitlines() == [
        "error: line 2 of the input is not UTF-8 text; convert it first (e.g. iconv -t UTF-8)"
    ]
    limit = run_cli("evaluate", "--checkpoint", checkpoint, "--limit", "0", "--device", "cpu")
    assert limit.returncode == 2 and limit.stderr.strip() == "error: --limit must be at least 1, got 0"


def test_missing_checkpoint_and_bad_config_are_clear_errors(tmp_path, capsys):
    assert main(["evaluate", "--checkpoint", str(tmp_path / "none.pt")]) == 2
    assert "no checkpoint at" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("training:\n  warmpu: 10\n", encoding="utf-8")
    assert main(["train", "--config", str(bad)]) == 2
    assert "unknown key(s) ['warmpu'] in section 'training'" in capsys.readouterr().err
    bad.write_text("model:\n  preset: tiny\n  d_model: 30\n", encoding="utf-8")
    assert main(["train", "--config", str(bad)]) == 2
    assert "must be divisible by n_heads" in capsys.readouterr().err


@pytest.mark.parametrize(
    "name",
    [
        "smoke",
        "multi30k_de_en_small",
        "multi30k_en_de_small",
        "multi30k_de_en_base",
        "multi30k_en_de_base",
        "multi30k_de_en_cpu",
        "multi30k_en_de_cpu",
    ],
)
def test_packaged_configs_are_valid(name):
    config = load_config(name)
    assert config.model.vocab_size == config.data.vocab_size
    assert 0 < config.training.checkpoint_every <= 100  # a crash loses minutes of work, not an epoch


# These run last in this file: the last one continues the smoke run.
def smoke_variant(tmp_path, **training):
    """The smoke config with some training settings changed, as a file."""
    raw = yaml.safe_load((CONFIG_DIR / "smoke.yaml").read_text(encoding="utf-8"))
    for section, values in training.items():
        raw.setdefault(section, {}).update(values)
    path = tmp_path / "variant.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return str(path)


def test_a_run_with_snapshots_records_its_bleu_per_minute_curve(mirror, tmp_path):
    config = smoke_variant(tmp_path, training={"snapshot_minutes": [0.001]})  # after the first step or so
    result = run_cli("train", "--config", config, "--run-dir", str(tmp_path / "run"), "--device", "cpu")
    assert result.returncode == 0, result.stderr
    curve = json.loads((tmp_path / "run" / "curve.json").read_text(encoding="utf-8"))
    scores = json.loads((tmp_path / "run" / "scores.json").read_text(encoding="utf-8"))
    first, end = curve["points"]
    assert first["minutes"] == 0.001 and 1 <= first["step"] < end["step"] == scores["steps"] == 20
    assert end["splits"] == scores["splits"]  # the last point is the run's own score
    assert set(first["splits"]) == {"val"} and first["splits"]["val"]["sentences"] == 50
    assert curve["environment"]["cpu"] and curve["environment"]["torch"]
    snapshot = tmp_path / "run" / "snapshot-0.001min.pt"
    translated = run_cli("translate", "--checkpoint", str(snapshot), "--device", "cpu", stdin="Ein Hund.\n")
    assert translated.returncode == 0, translated.stderr  # a snapshot is a model a reader can use


def test_snapshots_and_the_final_score_average_alike(tmp_path):
    config = smoke_variant(tmp_path, training={"snapshot_minutes": [1]}, evaluation={"average_last": 1})
    with pytest.raises(ValueError, match=r"set evaluation\.average_last to 2 too"):
        load_config(config)


def test_a_run_folder_is_never_trained_into_twice(smoke_run):
    metrics = (smoke_run / "metrics.csv").read_text(encoding="utf-8")
    result = run_cli("train", "--config", "smoke", "--run-dir", str(smoke_run), "--device", "cpu")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: {smoke_run} already holds a run: continue it with --resume, or choose another --run-dir"
    ]
    assert (smoke_run / "metrics.csv").read_text(encoding="utf-8") == metrics


def test_resume_refuses_a_config_that_changes_the_run(smoke_run, tmp_path):
    before = {name: (smoke_run / name).read_bytes() for name in ("tokenizer.model", "config.yaml", "checkpoint.pt")}
    changed = smoke_variant(tmp_path, data={"train_limit": 1000})
    result = run_cli("train", "--config", changed, "--run-dir", str(smoke_run), "--resume", "--device", "cpu")
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert "--resume: the config changes data.train_limit (2000 -> 1000)" in line
    assert before == {name: (smoke_run / name).read_bytes() for name in before}  # nothing overwritten


def test_resume_refuses_a_finished_run_that_it_would_not_train_further(smoke_run, tmp_path):
    before = {name: (smoke_run / name).read_bytes() for name in ("scores.json", "environment.json", "config.yaml")}
    shorter = smoke_variant(tmp_path, training={"max_steps": 10})  # a lower limit trains no further either
    for config in (str(smoke_run / "config.yaml"), "smoke", shorter):
        result = run_cli("train", "--config", config, "--run-dir", str(smoke_run), "--resume", "--device", "cpu")
        assert result.returncode == 2
        (line,) = result.stderr.strip().splitlines()
        assert f"--resume: the run in {smoke_run} has finished (its scores.json is written)" in line
    assert before == {name: (smoke_run / name).read_bytes() for name in before}  # nothing rewritten


def test_resume_continues_with_the_runs_own_tokenizer(smoke_run, tmp_path):
    tokenizer = (smoke_run / "tokenizer.model").read_bytes()
    longer = smoke_variant(tmp_path, training={"max_steps": 24})  # may change: how long to train
    result = run_cli("train", "--config", longer, "--run-dir", str(smoke_run), "--resume", "--device", "cpu")
    assert result.returncode == 0, result.stderr
    assert "resumed at step 20" in result.stderr
    assert (smoke_run / "tokenizer.model").read_bytes() == tokenizer
    assert json.loads((smoke_run / "scores.json").read_text(encoding="utf-8"))["steps"] == 24
    rows = (smoke_run / "metrics.csv").read_text(encoding="utf-8").splitlines()[1:]
    training_steps = [row.split(",")[0] for row in rows if row.split(",")[2]]  # rows with a training loss
    assert training_steps == [str(s) for s in range(1, 25)]  # every step once, none twice


def ctrl_c(*args, **kwargs):
    raise KeyboardInterrupt


def test_ctrl_c_during_evaluation_is_one_line_and_writes_no_hypotheses(smoke_run, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("transformer_lib.cli.commands.evaluate_split", ctrl_c)
    output = tmp_path / "hyp.txt"
    checkpoint = str(smoke_run / "checkpoint.pt")
    code = main(["evaluate", "--checkpoint", checkpoint, "--output", str(output), "--device", "cpu"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 130 and err == ["interrupted"]
    assert not output.exists()


def test_ctrl_c_while_a_finished_run_is_scored_says_how_to_score_it(mirror, tmp_path, capsys, monkeypatch):
    raw = yaml.safe_load((CONFIG_DIR / "smoke.yaml").read_text(encoding="utf-8"))
    raw["training"].update(max_steps=2, checkpoint_every=0)
    raw["evaluation"]["average_last"] = 0
    config = tmp_path / "short.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    monkeypatch.setattr("transformer_lib.cli.commands.evaluate_split", ctrl_c)
    run_dir = tmp_path / "run"
    code = main(["train", "--config", str(config), "--run-dir", str(run_dir), "--device", "cpu"])
    last = capsys.readouterr().err.strip().splitlines()[-1]  # after the run's log lines
    assert code == 130 and last.startswith("interrupted: during evaluation"), last
    assert last.endswith(f"evaluate --checkpoint {run_dir}")  # a run folder: the command finds its checkpoint
    assert (run_dir / "checkpoint.pt").exists() and not (run_dir / "scores.json").exists()


def test_score_reads_a_committed_runs_hypotheses_from_its_sweeps_archive(mirror, monkeypatch):
    """Lesson 11's exercise scores results/multi30k/sweep2/en_de-prenorm/test_2016_flickr.hyp.txt, which
    lies packed in sweep2.tar.gz: the score is the one the run computed when it trained (its scores.json)."""
    monkeypatch.chdir(ROOT)
    run = Path("results/multi30k/sweep2/en_de-prenorm")
    assert not (run / "test_2016_flickr.hyp.txt").exists()  # the file is only in the archive
    result = run_cli("score", str(run / "test_2016_flickr.hyp.txt"), "--split", "test_2016_flickr", "--tgt", "de")
    assert result.returncode == 0, result.stderr
    recorded = json.loads((run / "scores.json").read_text(encoding="utf-8"))["splits"]["test_2016_flickr"]
    scored = json.loads(result.stdout)
    for key in ("sacrebleu_cased", "bleu_tokenized_lowercase"):
        assert scored[key] == recorded[key], key
    missing = run_cli("score", str(run / "test_2099.hyp.txt"), "--split", "test_2016_flickr", "--tgt", "de")
    assert missing.returncode == 2 and missing.stderr == f"error: no hypotheses file {run / 'test_2099.hyp.txt'}\n"


def test_scores_of_the_references_themselves_and_of_a_wrong_file(mirror, tmp_path):
    from transformer_lib.cli import main
    from transformer_lib.data import load_multi30k

    refs = load_multi30k("val", "en")
    assert moses_bleu(refs, refs, "en") == pytest.approx(100.0)
    assert moses_bleu([r.upper() for r in refs], refs, "en") == pytest.approx(100.0)  # lowercased
    assert sacrebleu_score([r.upper() for r in refs], refs) < 10  # cased
    (tmp_path / "short.txt").write_text("\n".join(refs[:10]) + "\n", encoding="utf-8")
    assert main(["score", str(tmp_path / "short.txt"), "--split", "val", "--tgt", "en"]) == 2
