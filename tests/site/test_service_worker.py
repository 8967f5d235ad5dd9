"""The translator page's service worker as the build writes it (book/_ext/translator_site.py).

Its cache is named after a hash of the built files, so that a new build that changes a file the
page uses installs a new worker, which drops the old copies. These checks need no browser; the
worker at work, offline, is tests/site/test_translator_page.py's.
"""

import pytest

from conftest import ROOT, SITE, load_file

site = load_file(ROOT / "book" / "_ext" / "translator_site.py", "translator_site")

PAGE = '<script type="module" async src="../_static/translator/page.js"></script>'


def built(folder, page_text=PAGE):
    (folder / "_static" / "translator" / "models").mkdir(parents=True)
    (folder / "book").mkdir()
    (folder / "book" / "translator.html").write_text(page_text, encoding="utf-8")
    (folder / "book" / "other.html").write_text("<p>no translator</p>", encoding="utf-8")
    (folder / "_static" / "custom.css").write_text("p { color: black; }", encoding="utf-8")
    (folder / "_static" / "translator" / "models" / "encoder.onnx").write_bytes(b"model")
    return folder


def version(folder) -> str:
    text = (folder / "book" / "translator-sw.js").read_text(encoding="utf-8")
    return text.split('const BUILD = "')[1].split('"')[0]


def test_the_worker_is_written_beside_the_translator_page_only(tmp_path):
    site.write_service_workers(built(tmp_path))
    assert [p.name for p in (tmp_path / "book").glob("*-sw.js")] == ["translator-sw.js"]
    text = (tmp_path / "book" / "translator-sw.js").read_text(encoding="utf-8")
    assert text.replace(f'const BUILD = "{version(tmp_path)}";', 'const BUILD = "unbuilt";') == (
        site.SERVICE_WORKER.read_text(encoding="utf-8")
    )
    assert len(version(tmp_path)) == 16


def test_a_build_that_changes_a_file_the_page_uses_changes_the_version(tmp_path):
    folder = built(tmp_path)
    site.write_service_workers(folder)
    first = version(folder)
    site.write_service_workers(folder)
    assert version(folder) == first  # the same files: the same version
    (folder / "_static" / "translator" / "models" / "encoder.onnx").write_bytes(b"another model")
    site.write_service_workers(folder)
    assert version(folder) == first  # the models have their own versions (files.js)
    (folder / "_static" / "custom.css").write_text("p { color: navy; }", encoding="utf-8")
    site.write_service_workers(folder)
    assert version(folder) != first
    changed = version(folder)
    (folder / "book" / "translator.html").write_text(PAGE + "<p>new text</p>", encoding="utf-8")
    site.write_service_workers(folder)
    assert version(folder) != changed


def test_the_built_site_has_the_worker_of_its_files():
    """The built translator page's worker carries the hash of the built files (skipped without a build)."""
    page = SITE / "book" / "translator.html"
    if not page.is_file():
        pytest.skip(f"no built translator page in {SITE}: run `jupyter-book build .` first (.ci/run does)")
    assert version(SITE) == site.build_hash(SITE, page)
