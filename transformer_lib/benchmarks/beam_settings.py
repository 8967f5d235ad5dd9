"""The rule that chose the CPU recipe's beam size and length penalty on val (the appendix).

The setting with the highest mean val sacreBLEU replaces the recipe's if it beats it by at least
``MARGIN`` in the mean and on every seed's model; otherwise the recipe keeps its own. The rule was
fixed before measuring. ``python -m book_tools.benchmarks.beam_settings`` (the book's tools) decodes
the grid and applies it.
"""

from __future__ import annotations

import statistics

RECIPE = (5, 0.6)
MARGIN = 0.2  # sacreBLEU points on val


def choose(val: dict[tuple[int, float], list[float]], recipe: tuple[int, float] = RECIPE) -> tuple[int, float]:
    """The rule of this module's docstring: ``val`` maps (beam, alpha) to each seed's val score."""
    best = max(val, key=lambda setting: statistics.mean(val[setting]))
    gains = [a - b for a, b in zip(val[best], val[recipe], strict=True)]
    return best if statistics.mean(gains) >= MARGIN and min(gains) > 0 else recipe


if __name__ == "__main__":  # its command line moved to the book's tools
    from transformer_lib.errors import moved

    raise SystemExit(moved("book_tools.benchmarks.beam_settings"))
