"""The three translations on the book's first page (book/intro.md), made by the site's own models.

    python tools/scripts/intro_translations.py   # needs MULTI30K_DIR (the test set's sentences)

Translates three sentences of test_2016_flickr (none is in the training data; the translator
page offers the same ones) with the checkpoints that ``translator_models`` in ``_config.yml``
names, decoding greedily as the translator page does. Writes the record
``results/translator/intro_translations.json`` and the page's snippet
``results/translator/intro_translations.md`` (``book/intro.md`` includes it).
tests/site/test_intro.py translates the same sentences again and compares, so no translation on the
page can be typed by hand.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import torch
import yaml

from transformer_lib.config import DecodeConfig
from transformer_lib.data import load_multi30k
from transformer_lib.files import sha256_of, write_text
from transformer_lib.translation import load_model, translate_sentences

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "results" / "translator" / "intro_translations.json"
SNIPPET = RECORD.with_suffix(".md")
SPLIT = "test_2016_flickr"
EXAMPLES = (("de_en", 4), ("de_en", 6), ("en_de", 12))  # (direction, line of SPLIT from 0)
LANGUAGE = {"de": "German", "en": "English"}


def checkpoints() -> dict[str, str]:
    """Direction -> checkpoint (from the book's root) that the site's translator serves."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    return config["sphinx"]["config"]["translator_models"]


def translate(direction: str, sources: list[str]) -> list[str]:
    """Greedy translations of ``sources`` by the site's model for ``direction`` (on the CPU)."""
    model, tokenizer, _ = load_model(ROOT / checkpoints()[direction], torch.device("cpu"))
    return translate_sentences(model, tokenizer, sources, DecodeConfig(beam_size=1), torch.device("cpu"))


def render(rows: list[dict]) -> str:
    """The page's HTML for the record's rows: each source, the model's translation, a person's."""
    lines = ['<div class="intro-translations">']
    for row in rows:
        src, tgt = row["direction"].split("_")
        text = {key: html.escape(row[key]) for key in ("source", "translation", "reference")}
        lines += [
            '<figure class="intro-translation">',
            f"<figcaption>{LANGUAGE[src]} → {LANGUAGE[tgt]}</figcaption>",
            f'<p class="intro-source" lang="{src}">{text["source"]}</p>',
            f'<p class="intro-output"><span class="intro-label">The book\'s model:</span> '
            f'<span lang="{tgt}">{text["translation"]}</span></p>',
            f'<p class="intro-reference"><span class="intro-label">A person\'s translation:</span> '
            f'<span lang="{tgt}">{text["reference"]}</span></p>',
            "</figure>",
        ]
    return "\n".join([*lines, "</div>"]) + "\n"


def main() -> None:
    rows = []
    for direction, line in EXAMPLES:
        src, tgt = direction.split("_")
        source, reference = load_multi30k(SPLIT, src)[line], load_multi30k(SPLIT, tgt)[line]
        [translation] = translate(direction, [source])
        checkpoint = checkpoints()[direction]
        rows.append(
            {
                "direction": direction,
                "split": SPLIT,
                "line": line,
                "checkpoint": checkpoint,
                "checkpoint_sha256": sha256_of(ROOT / checkpoint),
                "decoding": "greedy",
                "source": source,
                "translation": translation,
                "reference": reference,
            }
        )
    write_text(RECORD, json.dumps({"rows": rows}, indent=2, ensure_ascii=False) + "\n")
    write_text(SNIPPET, render(rows))
    for row in rows:
        print(f"{row['direction']}: {row['source']} -> {row['translation']}")


if __name__ == "__main__":
    main()
