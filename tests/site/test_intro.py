"""The book's first page (book/intro.md) shows three translations: they are what the site's models
translate now (tools/scripts/intro_translations.py made them), not text typed by hand."""

import json
import re
from pathlib import Path

from conftest import tool_script
from transformer_lib.data import load_multi30k
from transformer_lib.files import sha256_of

ROOT = Path(__file__).parents[2]
intro = tool_script("intro_translations")

ROWS = json.loads(intro.RECORD.read_text(encoding="utf-8"))["rows"]


def test_the_intro_shows_the_record_and_the_record_is_the_site_models():
    assert [(row["direction"], row["line"]) for row in ROWS] == list(intro.EXAMPLES)
    assert intro.SNIPPET.read_text(encoding="utf-8") == intro.render(ROWS)
    assert "{include} ../results/translator/intro_translations.md" in (ROOT / "book/intro.md").read_text("utf-8")
    for row in ROWS:
        assert row["checkpoint"] == intro.checkpoints()[row["direction"]]
        assert row["checkpoint_sha256"] == sha256_of(ROOT / row["checkpoint"])


def test_the_intros_translations_are_what_the_models_translate():
    for row in ROWS:
        assert intro.translate(row["direction"], [row["source"]]) == [row["translation"]], row


def test_the_intros_sentences_are_the_test_sets(mirror):
    """Each source and reference is that line of the test set; the word the intro calls rare is."""
    for row in ROWS:
        src, tgt = row["direction"].split("_")
        assert load_multi30k(row["split"], src)[row["line"]] == row["source"]
        assert load_multi30k(row["split"], tgt)[row["line"]] == row["reference"]
    text = (ROOT / "book/intro.md").read_text(encoding="utf-8")
    word, count = re.search(r'"(\w+)" appears in only (\d+) of the 29,000 training sentences', text).groups()
    train = load_multi30k("train", "de")
    assert len(train) == 29000 and sum(word in sentence for sentence in train) == int(count)
    assert word in ROWS[1]["source"] and word.lower() not in ROWS[1]["translation"].lower()
