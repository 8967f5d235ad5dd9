import functools
import http.server
import shutil
import threading

import pytest

from transformer_lib import data
from transformer_lib.data import SPLITS, DataError, load_multi30k, load_pairs


@pytest.mark.parametrize("split", list(SPLITS))
@pytest.mark.parametrize("lang", ["de", "en", "fr"])
def test_sentence_counts(mirror, split, lang):
    sentences = load_multi30k(split, lang)
    assert (
        len(sentences)
        == {
            "train": 29_000,
            "val": 1_014,
            "test_2016_flickr": 1_000,
            "test_2017_flickr": 1_000,
            "test_2017_mscoco": 461,
        }[split]
    )
    assert all(s and s == s.strip() for s in sentences)


def test_pairs_are_line_aligned(mirror):
    pairs = load_pairs("train", "de", "en")
    assert pairs[0] == (
        "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
        "Two young, White males are outside near many bushes.",
    )
    assert pairs[-1] == (
        "Ein Mann in Shorts und Hawaiihemd lehnt sich über das Geländer eines Lotsenboots, "
        "mit Nebel und Bergen im Hintergrund.",
        "A man in shorts and a Hawaiian shirt leans over the rail of a pilot boat, "
        "with fog and mountains in the background.",
    )
    fr = load_multi30k("test_2016_flickr", "fr")
    en = load_multi30k("test_2016_flickr", "en")
    assert (en[0], fr[0]) == (
        "A man in an orange hat starring at something.",
        "Un homme avec un chapeau orange regardant quelque chose.",
    )


def test_unknown_split_or_language_names_the_choices():
    with pytest.raises(ValueError, match=r"unknown Multi30k split 'test'.*test_2016_flickr"):
        load_multi30k("test", "en")
    with pytest.raises(ValueError, match="unknown Multi30k language 'es'"):
        load_multi30k("train", "es")
    with pytest.raises(ValueError, match="no 'cs' text for split 'test_2017_flickr'"):
        load_multi30k("test_2017_flickr", "cs")


def test_corrupted_copy_fails_the_checksum(mirror, tmp_path, monkeypatch):
    shutil.copy(mirror / "val.en.gz", tmp_path / "val.en.gz")
    with open(tmp_path / "val.en.gz", "ab") as f:
        f.write(b"\0")
    monkeypatch.setenv(data.LOCAL_DIR_ENV, str(tmp_path))
    with pytest.raises(DataError, match=r"checksum mismatch for .*val\.en\.gz"):
        load_multi30k("val", "en")


def test_missing_file_in_local_folder_names_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv(data.LOCAL_DIR_ENV, str(tmp_path))
    with pytest.raises(DataError, match=r"val\.de\.gz does not exist: MULTI30K_DIR"):
        load_multi30k("val", "de")


def test_no_network_is_a_clear_error_and_leaves_no_partial_file(tmp_path, monkeypatch):
    monkeypatch.delenv(data.LOCAL_DIR_ENV, raising=False)
    monkeypatch.setenv(data.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(data, "BASE_URL", "http://127.0.0.1:9/multi30k")  # nothing listens on port 9
    with pytest.raises(DataError, match=r"could not download .*val\.de\.gz.*MULTI30K_DIR") as caught:
        load_multi30k("val", "de")
    assert not (tmp_path / "multi30k").exists()  # no partial file, and no empty cache folder
    assert caught.value.__suppress_context__  # no chained traceback of urllib's internals
    # In a notebook the error is one line (IPython shows what _render_traceback_ returns).
    (line,) = caught.value._render_traceback_()
    assert line.startswith("DataError: could not download") and "\n" not in line


@pytest.fixture
def server(tmp_path):
    """A loopback HTTP server over a folder, standing in for the canonical address."""
    root = tmp_path / "served"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_download_is_verified_and_cached(mirror, server, tmp_path, monkeypatch):
    root, url = server
    shutil.copy(mirror / "val.de.gz", root / "val.de.gz")
    monkeypatch.delenv(data.LOCAL_DIR_ENV, raising=False)
    monkeypatch.setenv(data.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(data, "BASE_URL", url)
    assert len(load_multi30k("val", "de")) == 1_014
    assert [p.name for p in (tmp_path / "cache" / "multi30k").iterdir()] == ["val.de.gz"]
    (root / "val.de.gz").unlink()  # the second read comes from the cache
    assert len(load_multi30k("val", "de")) == 1_014


def test_damaged_download_is_rejected_and_not_kept(mirror, server, tmp_path, monkeypatch):
    root, url = server
    (root / "val.de.gz").write_bytes((mirror / "val.de.gz").read_bytes()[:-10])  # truncated
    monkeypatch.delenv(data.LOCAL_DIR_ENV, raising=False)
    monkeypatch.setenv(data.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(data, "BASE_URL", url)
    with pytest.raises(DataError, match="checksum mismatch"):
        load_multi30k("val", "de")
    assert not (tmp_path / "cache").exists()
