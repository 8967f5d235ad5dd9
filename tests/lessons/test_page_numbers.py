"""The book's pages and the README say only what their records, lessons and sources show.

The lessons' rule (``test_numbers.py``) for the pages of ``book/`` and the README: a number or a ratio in a page's
prose is in the material the page names, or cited with its source in ``tests/data/page_facts.yaml``.
A page's material is every record of ``results/`` it names (a file, a folder's files, or a member of
a filed archive), the code and stored outputs of every lesson it links to or names ("lesson 11"),
every packaged config it names, and its own code blocks. A number quoted from a record and found in
no other of the page's material is flagged when the record changes; one that also appears elsewhere
(a lesson's outputs hold many numbers) is only checked to appear somewhere the page points to.

Run it as a report too: ``PYTHONPATH=tests:tests/lessons python tests/lessons/test_page_numbers.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from test_numbers import Finding, cell_text, check_sentence, numbers_in, prose
from test_prose import sentences

from transformer_lib.records import read_text

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted(p for p in (ROOT / "book").glob("*.md") if p.stem != "bibliography")]
FACTS = ROOT / "tests" / "data" / "page_facts.yaml"
RECORD = re.compile(r"results/[\w/.\-]*\w")
LESSON = re.compile(r"notebooks/(\d\d_\w+?|appendix_\w+?)(?:\.ipynb|\.html)?(?=[>)`\"#])|\b[Ll]essons? (\d\d?)\b")
CONFIG = re.compile(r"\b(multi30k_\w+|smoke)\b")


def page_facts() -> dict[str, list[str]]:
    """{page stem: the numbers its prose cites from a source}, from page_facts.yaml."""
    facts: dict[str, list[str]] = {}
    for fact in yaml.safe_load(FACTS.read_text(encoding="utf-8")):
        assert fact.get("source") and fact.get("pages"), f"{fact} names no source or no page"
        for page in fact["pages"]:
            facts.setdefault(page, []).extend(str(n) for n in fact["numbers"])
    return facts


def record_text(name: str) -> str:
    """A record's text: a file, every text file of a folder, or a member of a filed archive."""
    path = ROOT / name
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.suffix in (".json", ".txt", ".yaml", ".csv", ".md"))
        return "\n".join(p.read_text(encoding="utf-8") for p in files)
    try:
        return read_text(path)
    except (FileNotFoundError, KeyError, UnicodeDecodeError):
        return ""  # an archive, a folder not filed yet: tests/repository/test_named_paths.py checks the name


def lesson_text(stem: str) -> str:
    """A lesson's code and stored text outputs, read as test_numbers reads a cell."""
    notebook = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text(encoding="utf-8"))
    return "\n".join("\n".join(cell_text(cell)) for cell in notebook["cells"] if cell["cell_type"] == "code")


def material(markdown: str) -> str:
    """Everything the page names that its numbers may come from."""
    texts = [record_text(name) for name in sorted(set(RECORD.findall(markdown)))]
    stems = set()
    for name, number in LESSON.findall(markdown):  # a link to a lesson, or "lesson 11"
        stems |= {name} if name else {p.stem for p in (ROOT / "notebooks").glob(f"{int(number):02d}_*.ipynb")}
    texts += [lesson_text(stem) for stem in sorted(stems) if (ROOT / "notebooks" / f"{stem}.ipynb").is_file()]
    configs = ROOT / "transformer_lib" / "configs"
    texts += [(configs / f"{name}.yaml").read_text(encoding="utf-8") for name in sorted(set(CONFIG.findall(markdown)))
              if (configs / f"{name}.yaml").is_file()]  # fmt: skip
    texts += re.findall(r"```.*?```", markdown, flags=re.S)
    return "\n".join(texts)


def check_page(path: Path, facts: dict[str, list[str]]) -> list[Finding]:
    """What the page's prose says that its material (and its cited facts) does not show."""
    markdown = path.read_text(encoding="utf-8")
    shown = material(markdown)
    pool = numbers_in(shown)
    cited = facts.get(path.stem, [])
    found = []
    for sentence in sentences(prose(markdown)):
        found += check_sentence(path.stem, 0, sentence, shown, shown, pool, cited, None)
    return found


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.name)
def test_a_page_says_only_what_its_records_show(path):
    found = check_page(path, page_facts())
    assert not found, "\n".join(f"{path.name}: {f.kind} {f.text!r} in: {f.sentence[:160]}" for f in found)


def test_the_check_flags_a_number_its_record_does_not_hold(tmp_path, monkeypatch):
    """A page quoting a record: its numbers pass as the record holds them, and fail once changed."""
    record = "results/translator/onnx_precision.json"
    page = tmp_path / "page.md"
    for text, flagged in [
        (f"The files are 5.88 MB and 3.32 MB (`{record}`).", set()),
        (f"The files are 5.98 MB and 3.32 MB (`{record}`).", {"5.98"}),
        ("The base model has 63.1M parameters (lesson 8).", set()),
        ("The base model has 64.1M parameters (lesson 8).", {"64.1M"}),
    ]:
        page.write_text(text + "\n", encoding="utf-8")
        assert {finding.text for finding in check_page(page, {})} == flagged, text


if __name__ == "__main__":
    facts = page_facts()
    for page in PAGES:
        for f in check_page(page, facts):
            print(f"{page.name}: {f.kind} {f.text!r} in: {f.sentence[:160]}")
