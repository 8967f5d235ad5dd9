"""The book's reference pages say what the package holds."""

import re
from pathlib import Path

from transformer_lib.config import PRESETS
from transformer_lib.training import TrainConfig

BOOK = Path(__file__).resolve().parents[2] / "book"


def test_the_quick_reference_sizes_are_the_packages_presets():
    text = (BOOK / "quick_reference.md").read_text(encoding="utf-8")
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("|") and cells[0] in PRESETS:
            rows[cells[0]] = cells[1:]
    assert set(rows) == set(PRESETS)
    for name, preset in PRESETS.items():
        expected = [preset[k] for k in ("d_model", "n_heads", "n_layers", "d_ff", "dropout")]
        assert [type(v)(cell) for v, cell in zip(expected, rows[name], strict=True)] == expected, name
    assert f"warm-up of {TrainConfig.warmup} steps" in text


def test_the_api_reference_documents_every_module():
    package = Path(__file__).parents[2] / "transformer_lib"
    modules = set()
    for path in package.rglob("*.py"):
        parts = path.relative_to(package).with_suffix("").parts
        if path.name == "__init__.py":
            parts = parts[:-1]  # a part (cli's commands live in its __init__)
        elif path.name.startswith("_") or parts[0] == "benchmarks":
            continue
        modules.add(".".join(parts))
    modules -= {"", "family", "coursework", "benchmarks"}  # the package and parts without an API of their own
    documented = set(
        re.findall(r"automodule:: transformer_lib\.([\w.]+)", (BOOK / "api.md").read_text(encoding="utf-8"))
    )
    assert documented == modules, f"missing: {modules - documented}, not modules: {documented - modules}"
