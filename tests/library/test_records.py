"""The committed records: a sweep's bulk packed into one archive still reads, byte for byte, by its old path."""

import hashlib
import subprocess
import tarfile
from pathlib import Path

import pytest

from transformer_lib.errors import MissingFile
from transformer_lib.records import file_sweep, main, read_bytes, read_text

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "results" / "multi30k"


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@pytest.fixture
def sweep(tmp_path):
    """A sweep as ``sweep`` leaves it: two runs on one tokenizer, configs/, logs/, a nested sweep, timings."""
    top = tmp_path / "records" / "demo"
    files = {
        "sweep.json": b"{}\n",
        "gpu_utilization.csv": b"t,util\n0,99\n",
        "configs/a.yaml": b"model: {}\n",
        "logs/a.txt": b"started a\n",
        "a/config.yaml": b"data: {vocab_size: 8000}\n",
        "a/scores.json": b'{"steps": 3}\n',
        "a/ablations/val.greedy.json": b"{}\n",
        "a/ablations/val.greedy.hyp.txt": b"greedy\n",
        "a/metrics.csv": b"step,loss\n1,9.5\n",
        "a/val.hyp.txt": b"ein Hund\n",
        "a/tokenizer.model": b"\x00shared pieces",
        "b/config.yaml": b"data: {vocab_size: 8000}\n",
        "b/metrics.csv": b"step,loss\n1,9.4\n",
        "b/tokenizer.model": b"\x00shared pieces",
        "speed/rates.json": b'{"rates": {}}\n',
        "inner/sweep.json": b"{}\n",
        "inner/c/config.yaml": b"data: {vocab_size: 4000}\n",
        "inner/c/metrics.csv": b"step,loss\n1,8.0\n",
    }
    for name, data in files.items():
        write(top / name, data)
    return top, files


def test_a_filed_sweep_keeps_its_summaries_and_reads_every_file_back(sweep, tmp_path):
    top, files = sweep
    tokenizers = tmp_path / "records" / "tokenizers"
    file_sweep(top / "inner", tokenizers)  # nested sweeps first
    archive = file_sweep(top, tokenizers)
    assert archive == top.with_name("demo.tar.gz")
    loose = sorted(p.relative_to(top).as_posix() for p in top.rglob("*") if p.is_file())
    assert loose == [
        "a/ablations/val.greedy.json",
        "a/config.yaml",
        "a/scores.json",
        "b/config.yaml",
        "inner.tar.gz",
        "inner/c/config.yaml",
        "inner/sweep.json",
        "speed/rates.json",
        "sweep.json",
    ]
    digest = hashlib.sha256(b"\x00shared pieces").hexdigest()[:8]
    assert [p.name for p in tokenizers.iterdir()] == [f"bpe8000_{digest}.model"]  # one copy, named for what it is
    with tarfile.open(archive) as tar:
        assert tar.getmember("demo/b/tokenizer.model").issym()
        assert not any(name.startswith("demo/inner/") for name in tar.getnames())  # the nested sweep's own archive
    for name, data in files.items():
        assert read_bytes(top / name) == data, name
    assert read_text(top / "a" / "val.hyp.txt") == "ein Hund\n"


def test_a_kept_file_stays_loose_until_a_second_filing_packs_it(sweep, tmp_path):
    top, files = sweep
    file_sweep(top / "inner", tmp_path / "tokenizers")
    file_sweep(top, tmp_path / "tokenizers", keep=[top / "a" / "metrics.csv"])
    assert (top / "a" / "metrics.csv").is_file() and not (top / "b" / "metrics.csv").exists()
    file_sweep(top, tmp_path / "tokenizers")
    assert not (top / "a" / "metrics.csv").exists()
    for name, data in files.items():
        assert read_bytes(top / name) == data, name


def test_the_command_files_sweeps_then_packs_the_new_tokenizers(sweep, tmp_path, capsys):
    top, files = sweep
    tokenizers = tmp_path / "records" / "tokenizers"
    assert main([str(top / "inner"), str(top), "--tokenizers", str(tokenizers)]) == 0
    assert not tokenizers.exists() and tokenizers.with_name("tokenizers.tar.gz").is_file()
    for name, data in files.items():
        assert read_bytes(top / name) == data, name
    assert main([str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: no sweep folder") and len(err.splitlines()) == 1


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
    assert len(files) <= 400, f"results/ tracks {len(files)} files: pack a sweep (python -m transformer_lib.records)"
    assert size <= 15_000_000, f"results/ holds {size / 1e6:.1f} MB: pack a sweep or drop what nothing reads"
