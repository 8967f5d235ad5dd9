"""Filing a sweep: its bulk packed into one archive still reads, byte for byte, by its old path."""

import hashlib
import tarfile
from pathlib import Path

import pytest

from book_tools.records import file_sweep, main
from transformer_lib.records import read_bytes, read_text


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
