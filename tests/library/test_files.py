"""Atomic writes: a failed write leaves the old file as it was and no temporary file."""

import pytest

from transformer_lib.files import atomic_path, write_text


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path):
    target = tmp_path / "scores.json"
    write_text(target, "old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half of the new", encoding="utf-8")
        raise RuntimeError("disk full")
    assert target.read_text(encoding="utf-8") == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["scores.json"]


def test_a_successful_write_replaces_the_file_and_creates_its_folder(tmp_path):
    target = tmp_path / "new" / "config.yaml"
    write_text(target, "a: 1\n")
    write_text(target, "a: 2\n")
    assert target.read_text(encoding="utf-8") == "a: 2\n"
    assert [p.name for p in target.parent.iterdir()] == ["config.yaml"]
