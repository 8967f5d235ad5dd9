"""The sweep driver: every committed sweep file plans; runs train side by side; records pack without checkpoints."""

import json
import tarfile
from pathlib import Path

import pytest
import torch
import yaml

from book_tools import sweep
from book_tools.cli import main as tools
from conftest import run_cli
from transformer_lib import records
from transformer_lib.errors import InvalidValue, MissingFile
from transformer_lib.training.run_config import load_config, resolved_config

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow  # tens of seconds: started early by `pytest -n 2` (conftest.py)


def write(path, content) -> str:
    path.write_text(yaml.safe_dump(content), encoding="utf-8")
    return str(path)


def test_every_runs_config_is_checked_before_anything_starts(tmp_path):
    bad = write(
        tmp_path / "s.yaml", {"runs": {"ok": {"config": "smoke"}, "typo": {"config": "smoke", "model": {"d_modle": 8}}}}
    )
    with pytest.raises(InvalidValue, match=r"run 'typo'.*d_modle"):
        sweep.plan(bad, tmp_path / "out")
    with pytest.raises(MissingFile, match="no config 'nope'"):
        sweep.plan(write(tmp_path / "m.yaml", {"runs": {"a": {"config": "nope"}}}), tmp_path / "out")
    with pytest.raises(InvalidValue, match="run name"):
        sweep.plan(write(tmp_path / "n.yaml", {"runs": {"a/b": {"config": "smoke"}}}), tmp_path / "out")
    with pytest.raises(InvalidValue, match="'runs'"):
        sweep.plan(write(tmp_path / "e.yaml", {"common": {}}), tmp_path / "out")


EXPERIMENTS = sorted((ROOT / "experiments").rglob("*.yaml"))


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_committed_experiment_is_a_valid_sweep_or_run_config(path, tmp_path):
    """A typo in a sweep waiting for a GPU session fails here, not after the machine has started."""
    if "runs" in yaml.safe_load(path.read_text(encoding="utf-8")):
        configs = sweep.plan(path, tmp_path / "out")
        assert configs and all(p.is_file() for p in configs.values())
    else:
        load_config(path)


# Each sweep file of the CPU recipe and the results folder that holds its runs' records.
CPU_RECORDS = {
    "curve": "",
    "seeds": "seeds",
    "seeds_en_de": "seeds_en_de",
    "dropout0": "tuning/dropout0",
    "average10": "tuning/average10",
    "time_linear": "tuning/time_linear",
    "screen": "screen",
    "screen_en_de": "screen_en_de",
    "seeds_rotary": "seeds_rotary",
    "seeds_rotary_en_de": "seeds_rotary_en_de",
    "paired_rotary_en_de": "paired_rotary_en_de",
    "seeds_rotary_en_de_alone": "seeds_rotary_en_de_alone",
    "seeds_deep_en_de": "seeds_deep_en_de",
    "screen_smoothing_en_de": "screen_smoothing_en_de",
    "screen_gelu_en_de": "screen_gelu_en_de",
    "screen_vocab_dropout_en_de": "screen_vocab_dropout_en_de",
    "screen_warmup_en_de": "screen_warmup_en_de",
    "screen_cooldown_en_de": "screen_cooldown_en_de",
    "screen_width_heads_en_de": "screen_width_heads_en_de",
    "screen_lr_norm_en_de": "screen_lr_norm_en_de",
    "screen_deep_wide_en_de": "screen_deep_wide_en_de",
    "screen_batch_en_de": "screen_batch_en_de",
    "seeds_batch4096_en_de": "seeds_batch4096_en_de",
    "screen_wide_en_de": "screen_wide_en_de",
}


@pytest.mark.parametrize("name", CPU_RECORDS)
def test_a_cpu_sweep_file_still_runs_what_its_records_hold(name, tmp_path):
    """A recipe that changes after a sweep ran (a decoding, a position encoding) must be pinned in
    the sweep file, or running the file again would not repeat its records."""
    planned = sweep.plan(ROOT / f"experiments/multi30k/cpu/{name}.yaml", tmp_path)
    folder = ROOT / "results/multi30k/cpu" / CPU_RECORDS[name]
    recorded = {run: folder / run / "config.yaml" for run in planned if (folder / run / "config.yaml").is_file()}
    assert recorded, f"no run of {name}.yaml has a record in {folder}"
    for run, path in recorded.items():
        assert resolved_config(load_config(str(planned[run]))) == resolved_config(load_config(str(path))), run


def test_the_batch_4096_seeds_take_seed_0_from_the_screens_record(tmp_path):
    """Seed 0 of seeds_batch4096_en_de.yaml did not train again: its record is the batch screen's run."""
    planned = sweep.plan(ROOT / "experiments/multi30k/cpu/seeds_batch4096_en_de.yaml", tmp_path)
    screen = ROOT / "results/multi30k/cpu/screen_batch_en_de/en_de-batch4096/config.yaml"
    assert resolved_config(load_config(str(planned["en_de-seed0"]))) == resolved_config(load_config(str(screen)))


def test_round3_changes_only_precision_seed_and_time_of_the_shipped_recipe(tmp_path):
    """Round 3's seeds and precisions train sweep 2's recipe, not a drifted copy of it."""
    for name in ("precision", "seeds"):
        for path in sweep.plan(ROOT / f"experiments/multi30k/round3/{name}.yaml", tmp_path / name).values():
            config = yaml.safe_load(path.read_text(encoding="utf-8"))
            direction = f"{config['data']['src']}_{config['data']['tgt']}"
            shipped = yaml.safe_load(
                records.read_text(ROOT / f"results/multi30k/sweep2/configs/{direction}-prenorm.yaml")
            )
            shipped["data"].pop("tokenizer")  # "bpe", the default, which the packaged config leaves out
            for section in ("data", "model", "task", "decoding", "evaluation"):
                assert config[section] == shipped[section], section
            training, before = config["training"], shipped["training"]
            assert not training.get("compile", False)  # sweep 2 trained without torch.compile
            changed = {k for k in set(training) | set(before) if training.get(k) != before.get(k)}
            assert changed <= {"precision", "seed", "max_minutes", "bf16", "compile"}, changed


def test_round4_changes_only_graphs_padding_seed_and_length_of_the_shipped_recipe(tmp_path):
    """Round 4's check and seeds train the packaged recipe with CUDA graphs and lengths padded to 8; nothing else
    (the check also scores val only, with its last weights)."""
    from transformer_lib.training.run_config import config_path

    for name in ("check", "seeds"):
        for run, path in sweep.plan(ROOT / f"experiments/multi30k/round4/{name}.yaml", tmp_path / name).items():
            config = yaml.safe_load(path.read_text(encoding="utf-8"))
            shipped = yaml.safe_load(config_path(f"multi30k_{run[:5]}_tiny").read_text(encoding="utf-8"))
            assert config["task"] == {**shipped["task"], "pad_multiple": 8}, run
            for section in ("data", "model", "decoding"):
                assert config[section] == shipped[section], (run, section)
            check = {"splits": ["val"], "average_last": 1}  # the check scores val only, with the last weights
            assert config["evaluation"] == {**shipped["evaluation"], **(check if name == "check" else {})}, run
            training, before = config["training"], shipped["training"]
            changed = {k for k in set(training) | set(before) if training.get(k) != before.get(k)}
            allowed = {"cuda_graphs", "precision", "progress", "seed"}
            if name == "check":  # 300 updates, validated and kept once
                allowed |= {"max_steps", "eval_every", "checkpoint_every", "keep_last"}
            assert changed <= allowed, (run, changed)
            assert training["precision"] == "fp32" and training.get("cuda_graphs", False) == (run != "de_en-eager")


def test_a_runs_sections_override_common_which_overrides_its_config(tmp_path):
    file = write(
        tmp_path / "s.yaml",
        {
            "common": {"model": {"n_layers": 3, "dropout": 0.2}, "training": {"max_minutes": 2}},
            "runs": {"r": {"config": "smoke", "model": {"n_layers": 1}}},
        },
    )
    written = yaml.safe_load(sweep.plan(file, tmp_path / "out")["r"].read_text(encoding="utf-8"))
    assert written["model"] == {"preset": "tiny", "n_layers": 1, "dropout": 0.2}
    assert written["training"]["max_minutes"] == 2 and written["training"]["max_steps"] == 20  # smoke's own


def test_a_sweep_trains_side_by_side_and_packs_its_records_without_checkpoints(mirror, tmp_path):
    file = write(
        tmp_path / "s.yaml",
        {
            "common": {"training": {"max_steps": 6}, "evaluation": {"limit": 10}},
            "runs": {"a": {"config": "smoke"}, "b": {"config": "smoke", "evaluation": {"export_half": True}}},
        },
    )
    out, archive = tmp_path / "sweep", tmp_path / "records.tar.gz"
    command = ["sweep", file, "--out", str(out), "--jobs", "2"]
    result = run_cli(*command, "--device", "cpu", "--archive", str(archive))
    assert result.returncode == 0, result.stderr
    summary = json.loads((out / "sweep.json").read_text(encoding="utf-8"))
    assert list(summary) == ["a", "b"] and all(run["returncode"] == 0 for run in summary.values())
    assert summary["a"]["scores"]["steps"] == 6 and "val" in summary["a"]["scores"]["splits"]
    assert (
        json.loads((out / "a" / "environment.json").read_text(encoding="utf-8"))["cpu_threads"] == 1
    )  # --threads' default
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
    assert {"sweep/a/scores.json", "sweep/b/val.hyp.txt", "sweep/b/model_fp16.pt", "sweep/logs/a.txt"} <= names
    assert not [n for n in names if n.endswith(".pt") and not n.endswith("model_fp16.pt")]
    rerun = run_cli(*command, "--device", "cpu")
    assert rerun.returncode == 2 and "already holds a run" in rerun.stderr
    no_threads = run_cli(*command, "--threads", "0")
    assert no_threads.returncode == 2 and no_threads.stderr.strip() == "error: --threads must be at least 1, got 0"


def test_runs_trains_some_of_a_files_runs_and_the_rest_join_its_record(mirror, tmp_path):
    """A stopped sweep goes on with --runs into the same --out; sweep.json keeps the file's order."""
    file = write(
        tmp_path / "s.yaml",
        {
            "common": {"training": {"max_steps": 2}, "evaluation": {"limit": 5}},
            "runs": {"a": {"config": "smoke"}, "b": {"config": "smoke"}, "c": {"config": "smoke"}},
        },
    )
    out = tmp_path / "sweep"
    command = ["sweep", file, "--out", str(out), "--device", "cpu"]
    typo = run_cli(*command, "--runs", "c", "d")
    assert typo.returncode == 2 and typo.stderr.strip() == f"error: --runs: no run 'd' in {file}; its runs: a, b, c"
    assert not out.exists()  # nothing written before the check
    for runs in (["c"], ["a"]):
        result = run_cli(*command, "--runs", *runs)
        assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["a", "c", "configs", "logs", "sweep.json"]
    summary = json.loads((out / "sweep.json").read_text(encoding="utf-8"))
    assert list(summary) == ["a", "c"] and all(run["scores"]["steps"] == 2 for run in summary.values())


def test_a_sweep_reads_floats_as_run_configs_do(tmp_path):
    """PyYAML's YAML 1.1 reads 1e-9 as a string; the sweep must read it as load_config does, a float."""
    (tmp_path / "s.yaml").write_text(
        "runs:\n  r:\n    config: smoke\n    training: {adam_eps: 1e-9}\n", encoding="utf-8"
    )
    written = yaml.safe_load(sweep.plan(tmp_path / "s.yaml", tmp_path / "out")["r"].read_text(encoding="utf-8"))
    assert written["training"]["adam_eps"] == 1e-9


@pytest.mark.parametrize(("device", "message"), [("gpu", "unknown device 'gpu'"), ("cuda:0", "no CUDA GPU")])
def test_a_sweep_on_a_device_that_is_not_here_starts_nothing(tmp_path, capsys, device, message):
    """Checked once, before any run's process starts (it used to start them all, each failing alone)."""
    if message == "no CUDA GPU" and torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    file = tmp_path / "s.yaml"
    file.write_text("runs:\n  a: {config: smoke}\n  b: {config: smoke}\n", encoding="utf-8")
    code = tools(["sweep", str(file), "--out", str(tmp_path / "out"), "--device", device])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0], err
    assert not (tmp_path / "out").exists()
