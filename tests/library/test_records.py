"""The committed records: a sweep's bulk packed into one archive still reads, byte for byte, by its old path."""

import subprocess
from pathlib import Path

import pytest
import yaml

from transformer_lib.errors import MissingFile
from transformer_lib.records import read_bytes, read_text, recipe_summary

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "results" / "multi30k"


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_a_missing_record_says_where_it_looked(tmp_path):
    with pytest.raises(MissingFile, match=r"no record .*metrics\.csv: neither a file nor in a sweep archive"):
        read_bytes(tmp_path / "sweep" / "run" / "metrics.csv")


@pytest.mark.parametrize(
    "path, lines",
    [
        ("sweep2/de_en-prenorm/test_2016_flickr.hyp.txt", 1000),  # lesson 11's translations
        ("sweep3/en_de-prenorm/test_2017_mscoco.hyp.txt", 461),
        ("round3/seeds/de_en-seed1/test_2016_flickr.hyp.txt", 1000),
        ("cpu/de_en/test_2016_flickr.hyp.txt", 1000),  # the capstone's solution
    ],
)
def test_the_committed_hypotheses_read_whole(path, lines):
    assert len(read_text(RECORDS / path).splitlines()) == lines


def test_every_committed_run_keeps_its_summaries_and_its_metrics_read():
    runs = sorted(p.parent for p in RECORDS.rglob("environment.json") if "ablations" not in p.parts)
    assert len(runs) == 74
    for run in runs:
        assert (run / "config.yaml").is_file(), run
        assert (run / "scores.json").is_file() or run.name == "en_de-lr1.8", run  # a screen stopped before scoring
        header = read_text(run / "metrics.csv").splitlines()[0]
        assert header.startswith("step,"), run
        assert read_bytes(run / "tokenizer.model")[:1] == b"\n", run  # a SentencePiece model's first field


def test_the_records_stay_small_enough_to_clone():
    """results/ at most 15 MB in at most 400 files: each sweep's bulk is in its archive, not loose."""
    listed = subprocess.run(["git", "ls-files", "-z", "results"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    files = [ROOT / name for name in listed.stdout.split("\0") if name]
    size = sum(path.stat().st_size for path in files if path.is_file())
    remedy = "pack a sweep (python -m book_tools.records) or drop what nothing reads"
    assert len(files) <= 400, f"results/ tracks {len(files)} files: {remedy}"
    assert size <= 15_000_000, f"results/ holds {size / 1e6:.1f} MB: pack a sweep or drop what nothing reads"


def test_the_results_are_found_beside_the_lessons_or_in_a_clone(tmp_path, monkeypatch):
    """In a checkout the lessons read ../results; alone (Colab) they clone the book once, and say so if they cannot."""
    from transformer_lib.records import results_folder

    monkeypatch.chdir(ROOT / "notebooks")
    assert results_folder("https://example.invalid/none").resolve() == ROOT / "results"  # nothing cloned
    book = tmp_path / "book"
    (book / "results").mkdir(parents=True)
    (book / "results" / "a.txt").write_text("a record\n", encoding="utf-8")
    git = ["git", "-C", str(book), "-c", "user.name=t", "-c", "user.email=t@t"]
    for command in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "records"]):
        subprocess.run(git + command, check=True, capture_output=True)
    alone = tmp_path / "alone"
    alone.mkdir()
    monkeypatch.chdir(alone)
    for _ in range(2):  # the second time, the clone is there
        assert (results_folder(f"file://{book}") / "a.txt").read_text(encoding="utf-8") == "a record\n"
    with pytest.raises(MissingFile, match=r"no results/ beside this notebook, and cloning file://.*nowhere failed"):
        results_folder(f"file://{tmp_path / 'nowhere'}")


def test_the_cpu_recipes_read_as_the_lesson_and_its_appendix_read_them(capsys):
    from transformer_lib.records import cpu_recipes, seed_curves, speed_record

    recipes = cpu_recipes(RECORDS / "cpu")
    assert list(recipes.curves) == ["de→en", "en→de", "de→en, sinusoidal", "en→de, sinusoidal"]
    assert recipes.recipe_runs["de→en, sinusoidal"] == recipes.runs["de→en"] == seed_curves(RECORDS / "cpu/seeds")
    assert recipes.forty["minutes"] == 40
    assert f"one run of 40 minutes: {recipes.forty['step']:,} updates" in capsys.readouterr().out
    record = speed_record(RECORDS / "cpu" / "speed", "positions")
    assert record["rates"] == {row["variant"]: row["updates_per_s"] for row in record["rows"]}


def test_the_recipe_summary_says_the_schedule_and_budget_the_run_recorded():
    """A run on the time-linear schedule with a time budget only (the CPU tuning's): no 1/sqrt(step), no step count."""
    run = ROOT / "results" / "multi30k" / "cpu" / "tuning" / "time_linear" / "de_en-time_linear-seed0"
    training = yaml.safe_load((run / "config.yaml").read_text(encoding="utf-8"))["training"]
    assert (training["schedule"], training["max_steps"]) == ("time_linear", None)
    summary = recipe_summary(run)
    assert "times a line falling to 0 at the time budget" in summary and "1/sqrt" not in summary
    assert f"at most {training['max_minutes']} minutes\n" in summary
