"""The lessons say only what their outputs show.

A number in a lesson's prose is either in the code or the stored outputs of the code cells the
sentence discusses (the nearest ones before and after it; a summary discusses its whole lesson), or
a cited fact listed with its source in ``tests/data/cited_facts.yaml``. A ratio ("about five times",
"twice", "a fifth") must be printed as a ratio or bracketed by an assert. A sentence that says
"never", "always", "none", "nothing", "no ..." or "every" about a result sits beside an assert of
that strength, or is listed as a statement about the design, not a result.

Run it as a report too: ``PYTHONPATH=tests python tests/lessons/test_numbers.py`` prints every finding.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from test_prose import sentences  # the same sentences the length check counts

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
FACTS = ROOT / "tests" / "data" / "cited_facts.yaml"

WINDOW = 2  # code cells on each side of a markdown cell that its sentences discuss

SPELLED = {
    "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
    "eleven": 11, "twelve": 12, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "hundred": 100,
}  # fmt: skip
FRACTIONS = {"half": 0.5, "a third": 1 / 3, "a quarter": 0.25, "a fifth": 0.2, "a tenth": 0.1}
# Words before a number that make it a name, not a value: "lesson 3", "exercise 2", "Python 3.10".
NAMING = re.compile(
    r"(?:lessons?|exercises?|parts?|chapters?|sections?|figures?|cells?|commands?|Python|PyTorch|version"
    r"|step|table|question|item|equation|round|vol\.|pp?\.)\s*(?:\d[\d.]*(?:\s*(?:,|and|or|to|–)\s*)?)*$",
    re.IGNORECASE,
)
NUMBER = re.compile(
    r"(?<![\w.\\/^-])"  # not inside a name (H100, fp16, test_2016), a path or a power
    r"(?P<value>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?(?:e-?\d+)?)"
    r"(?P<power>\^\{?[\w.-]+\}?)?(?P<fraction>/\d[\d,]*)?"
    r"(?P<unit>\s?%|\s?×|k\b|M\b)?"
    r"(?![\w/])"
)
RATIO = re.compile(
    r"(?P<n>\d+(?:\.\d+)?|" + "|".join(SPELLED) + r")\s*(?:times\b|×)(?!\s*\d)"
    r"|(?<![\d\s])\s?(?:×|\bx)\s*(?P<n2>\d+(?:\.\d+)?)\b(?!\s*[×x]\s*\d)"
    r"|\b(?P<twice>twice|half)\b(?!-| of| a minute| an hour)"
    r"|\b(?P<frac>a third|a quarter|a fifth|a tenth)\b(?= of| smaller| larger| less| more| as|[.,;:)])",
    re.IGNORECASE,
)
ABSOLUTE = re.compile(
    r"(?<!almost )(?<!nearly )\b(never|always|none|nothing|no(?= \w+)(?! (?:better|worse|longer|more|less)\b)|every)\b",
    re.IGNORECASE,
)
# The asserts of each strength: "never", "none", "nothing" and "no" are zero; "always" and "every" are all.
ZERO_ASSERT = re.compile(
    r"assert\b.*(?:==\s*(?:0|0\.0|\[\]|set\(\)|\(\)|\{\}|\"\")(?![\d.])|\bnot any\(|\bnot in\b|\bnot\s+\w+\s*$"
    r"|torch\.equal|assert_close|allclose|\ball\(|\.all\(\)|==\s*[A-Za-z_(\[])",
    re.M,
)
ALL_ASSERT = re.compile(
    r"assert\b.*(?:==\s*(?:1|1\.0|len\()(?![\d.])|\ball\(|\bmin\(|\.all\(\)|torch\.equal|assert_close|allclose"
    r"|==\s*[A-Za-z_(\[])",
    re.M,
)
# A quoted example of text with punctuation ("street.", "."), as a tokenizer would see it.
EXAMPLE = re.compile(r'(?<![\w*])"([^"\s\w]|\w+[^"\s\w]+)"')
# A duration is a number like any other: "about 40 seconds" stands only where the code or an output
# shows it (a recipe's time limit, a printed run time). Run times promised in words ("half a minute")
# are caught by tests/lessons/test_prose.py; the lesson tables' times by
# tests/repository/test_lesson_times.py.


@dataclass(frozen=True)
class Finding:
    notebook: str
    cell: int
    kind: str  # "number", "ratio", "example" or "absolute"
    text: str  # what was found
    sentence: str

    def __str__(self) -> str:
        return f"{self.notebook} cell {self.cell}: {self.kind} {self.text!r} in: {self.sentence[:160]}"


def cited_facts() -> dict[str, list[str]]:
    """{notebook stem or "*": the numbers its prose cites from a source}, from cited_facts.yaml."""
    facts: dict[str, list[str]] = {}
    for fact in yaml.safe_load(FACTS.read_text(encoding="utf-8")):
        assert fact.get("source"), f"{fact} names no source"
        for where in fact.get("lessons", ["*"]):
            facts.setdefault(where, []).extend(str(n) for n in fact["numbers"])
    return facts


def design_statements() -> dict[str, list[str]]:
    """{notebook stem: the starts of sentences whose "never"/"every"/"no" is about the design}."""
    data = yaml.safe_load((ROOT / "tests" / "data" / "design_statements.yaml").read_text(encoding="utf-8"))
    return {stem: list(starts) for stem, starts in (data or {}).items()}


def prose(markdown: str) -> str:
    """The text a reader reads as sentences: no code blocks, display math, images, link targets,
    HTML tags, inline code or directives. Inline math stays (its numbers are read too)."""
    text = re.sub(r"```.*?```|:::.*?:::", " ", markdown, flags=re.S)
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.S)
    text = re.sub(r"\{cite[^}]*\}`[^`]*`", " ", text)
    text = re.sub(r"`[^`\n]*`", " ", text)
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", " ", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", " ", text)
    text = text.replace("{,}", ",").replace("\\,", "")
    text = re.sub(r"(\d+(?:\.\d+)?)\s*\\(?:cdot|times)\s*10\^\{(-?\d+)\}", r"\1e\2", text)  # 4 \cdot 10^{-3}
    text = re.sub(r"(?<![\d.])10\^\{(-?\d+)\}", r"1e\1", text)  # 10^{-9}
    text = re.sub(r"\\frac\{([^}]*)\}\{([^}]*)\}", r"\1/\2", text)
    text = re.sub(r"\$([^$]*)\$", lambda m: "" if equation_holds(m.group(1)) else " ".join(m.group(1).split()), text)
    text = re.sub(r"^\s*#+\s.*$", " ", text, flags=re.M)  # headings name things
    return text


def equation_holds(formula: str) -> bool:
    """Whether inline math is arithmetic that is true: ``4(512^2+512)=1,050,624`` holds (its
    numbers then need no output: the reader can redo the sum)."""
    sides = " ".join(formula.split()).split("=")
    if len(sides) < 2:
        return False
    values = []
    for side in sides:
        expr = re.sub(r"\\(?:log|ln)\s*(\d+)", r"log(\1)", side)
        expr = expr.replace("\\cdot", "*").replace("\\times", "*").replace("^", "**").replace("{", "(")
        expr = re.sub(r"(?<=\d),(?=\d{3})", "", expr.replace("}", ")"))
        expr = re.sub(r"(\d|\))\s*\(", r"\1*(", expr).strip()
        if not re.fullmatch(r"(?:[\d.\s+*/()-]|log)+", expr):
            return False
        try:
            values.append(float(eval(expr, {"__builtins__": {}, "log": math.log})))  # digits, operators, log
        except (SyntaxError, ZeroDivisionError, TypeError, ValueError):
            return False
    # exact to the last digit written: "= 0.57" allows 0.565 to 0.575
    written = re.fullmatch(r"\s*\d[\d,]*(?:\.(\d+))?\s*", sides[-1])
    tolerance = 0.5 * 10 ** -len(written.group(1) or "") if written else 1e-9 * abs(values[-1])
    return all(abs(v - values[-1]) <= tolerance + 1e-12 for v in values)


def numbers_in(text: str) -> list[float]:
    """Every number in code or output text: 60,611, 3.3e+07, 0.35, 42.1."""
    found = []
    for match in re.finditer(r"(?<![\w.])-?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(e[+-]?\d+)?", text):
        found.append(float(match.group(0).replace(",", "")))
    return found


def ratios_in(text: str) -> list[float]:
    """The numbers printed or computed as ratios: 5.1×, x1.7, 3.2 times."""
    pattern = r"(\d+(?:\.\d+)?)\s*(?:×|x\b|times)|(?:×|\bx)\s*(\d+(?:\.\d+)?)"
    return [float(a or b) for a, b in re.findall(pattern, text)]


def asserts(code: str) -> list[str]:
    return re.findall(r"assert\b[^\n]*", code)


def asserted_bounds(code: str) -> list[tuple[float, float]]:
    """(low, high) of every pair of numbers in one assert: ``assert 4 < ratio < 6`` gives (4, 6)."""
    bounds = []
    for line in re.findall(r"assert\b[^\n]*", code):
        values = sorted(numbers_in(line))
        bounds += [(a, b) for i, a in enumerate(values) for b in values[i + 1 :]]
    return bounds


def decimals(value: str) -> int:
    if "e" in value:
        mantissa, exponent = value.split("e")
        return decimals(mantissa) - int(exponent)
    return len(value.split(".")[1]) if "." in value else 0


def shown(value: float, places: int, pool: list[float]) -> bool:
    """Whether a number written with ``places`` decimals is one of ``pool``, rounded, or a
    fraction of it written as a percentage (0.58 is 58 %), or the other way round."""
    for number in pool:
        complement = [1 - number] if 0 < number < 1 else []  # a probability's other side: 0.4 and 0.6
        for candidate in (number, number * 100, number / 100, number / 1000, number / 1e6, *complement):
            if round(candidate, places) == round(value, places):
                return True
    return False


def cell_text(cell: dict) -> tuple[str, str]:
    """(source, stored text outputs) of a code cell."""
    out = []
    for output in cell.get("outputs", []):
        out.append("".join(output.get("text", "")))
        data = output.get("data", {})
        for kind in ("text/plain", "text/markdown", "text/html"):
            out.append("".join(data.get(kind, "")))
    return "".join(cell["source"]), "\n".join(out)


def material(cells: list[dict], index: int, summary: bool) -> tuple[str, str]:
    """The code and outputs that markdown cell ``index`` discusses: the nearest code cells on each
    side (for a summary, all of them)."""
    code_cells = [i for i, c in enumerate(cells) if c["cell_type"] == "code"]
    if summary:
        chosen = code_cells
    else:
        before = [i for i in code_cells if i < index][-WINDOW:]
        after = [i for i in code_cells if i > index][:WINDOW]
        chosen = before + after
    texts = [cell_text(cells[i]) for i in chosen]
    return "\n".join(t[0] for t in texts), "\n".join(t[1] for t in texts)


def check_notebook(path: Path, facts: dict[str, list[str]], design: dict[str, list[str]]) -> list[Finding]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    cited = facts.get("*", []) + facts.get(path.stem, [])
    cited_pool = [float(n.replace(",", "")) for n in cited if re.fullmatch(r"[\d,.]+(?:e[+-]?\d+)?", n)]
    findings = []
    section = ""
    for index, cell in enumerate(cells):
        if cell["cell_type"] != "markdown":
            continue
        source = "".join(cell["source"])
        headings = re.findall(r"^#+\s+(.*)$", source, flags=re.M)
        if headings:
            section = headings[-1]
        if section.lower().startswith("exercises"):
            continue  # an exercise's numbers are what to try, not what was found
        summary = section.lower().startswith(("summary", "what we"))
        code, outputs = material(cells, index, summary)
        # a constant the lesson set earlier in code (a task's size, a model's width) may be restated;
        # a result must be in the outputs beside the sentence
        earlier = "\n".join("".join(c["source"]) for c in cells[:index] if c["cell_type"] == "code")
        pool = numbers_in(code + "\n" + outputs + "\n" + earlier) + cited_pool
        # a cell right after an output, or a summary, reads a result: its "never" must be asserted
        after_output = index > 0 and cells[index - 1]["cell_type"] == "code" and bool(cells[index - 1].get("outputs"))
        about_results = after_output or summary
        for sentence in sentences(prose(source)):
            findings += check_sentence(
                path.stem,
                index,
                sentence,
                code,
                outputs,
                pool,
                cited,
                design if about_results else None,
                summary=summary,
            )
    return findings


def check_sentence(
    stem: str,
    index: int,
    sentence: str,
    code: str,
    outputs: str,
    pool: list[float],
    cited: list[str],
    design: dict[str, list[str]] | None,
    summary: bool = False,
) -> list[Finding]:
    """What one sentence says that its material does not show. ``design`` is None where the
    sentence does not read a result (its absolute words are then not checked)."""
    found = []
    for match in NUMBER.finditer(sentence):
        if NAMING.search(sentence[: match.start()]) or (match.group("unit") or "").strip() == "×":
            continue
        if re.match(r"\s*[×x]\s*\d", sentence[match.end() :]):
            continue  # a size such as 8×8
        if re.search(r"\d\s*[×x]\s*$", sentence[: match.start()]):
            continue
        text = match.group(0).strip()
        value = match.group("value").replace(",", "")
        if match.group("power") or match.group("fraction"):
            if text.replace(" ", "") not in code.replace(" ", "") + outputs and text not in cited:
                found.append(Finding(stem, index, "number", text, sentence))
            continue
        number = float(value)
        unit = (match.group("unit") or "").strip()
        if any(re.fullmatch(r"[\d,.]+(?:e[+-]?\d+)?", c) and float(c.replace(",", "")) == number for c in cited):
            continue
        if number in (0, 1) and not unit:
            continue
        scale = {"k": 3, "M": 6}.get(unit, 0)  # 63.1M is 63,100,000 written to the nearest 100,000
        number *= 10**scale
        if 1900 <= number <= 2030 and not unit and "." not in value:
            continue  # a year: the papers' and the data sets'
        if not shown(number, decimals(value) - scale, pool):
            found.append(Finding(stem, index, "number", text, sentence))
    printed = ratios_in(outputs)
    bounds = asserted_bounds(code)
    for match in RATIO.finditer(sentence):
        word = (match.group("n") or match.group("n2") or match.group("twice") or match.group("frac") or "").lower()
        if word in SPELLED:
            value = float(SPELLED[word])
        elif word in ("twice", "half"):
            value = 2.0 if word == "twice" else 0.5
        elif word in FRACTIONS:
            value = FRACTIONS[word]
        else:
            value = float(word)
        places = decimals(word) if word[:1].isdigit() else 0
        candidates = [value] if value >= 1 else [value, 1 / value, 1 + value]
        ok = any(shown(v, places if v >= 1 else 2, printed) for v in candidates)
        ok = ok or (value < 1 and shown(value, 2, numbers_in(outputs)))  # "a quarter" beside 25%
        ok = ok or any(shown(v, places, numbers_in(line)) for v in candidates for line in asserts(code))
        ok = ok or any(lo <= v <= hi for v in candidates for lo, hi in bounds)
        if not ok and word not in cited:
            found.append(Finding(stem, index, "ratio", match.group(0), sentence))
    for example in EXAMPLE.findall(sentence):
        if example not in code + outputs:
            found.append(Finding(stem, index, "example", example, sentence))
    absolute = ABSOLUTE.search(sentence) if design is not None else None
    if absolute and not any(sentence.startswith(start) for start in design.get(stem, [])):
        universal = absolute.group(0).lower() in ("always", "every")  # "every output unchanged" may be "== 0"
        # a summary reads the whole lesson, so any assert would do: its absolute claims are reviewed
        # one by one instead (design_statements.yaml), each against the assert that shows it
        if summary or not (ZERO_ASSERT.search(code) or (universal and ALL_ASSERT.search(code))):
            found.append(Finding(stem, index, "absolute", absolute.group(0), sentence))
    return found


def all_findings() -> list[Finding]:
    facts, design = cited_facts(), design_statements()
    return [f for path in NOTEBOOKS for f in check_notebook(path, facts, design)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_prose_says_only_what_the_outputs_show(path):
    findings = [str(f) for f in check_notebook(path, cited_facts(), design_statements())]
    assert not findings, "\n".join(findings)


def findings_in(markdown: str, code: str, outputs: str, about_results: bool = True, summary: bool = False) -> set:
    """The kinds of finding for a passage beside the given code and outputs (no cited facts)."""
    pool = numbers_in(code + "\n" + outputs)
    kinds = set()
    for sentence in sentences(prose(markdown)):
        design = {} if about_results else None
        kinds |= {f.kind for f in check_sentence("x", 0, sentence, code, outputs, pool, [], design, summary)}
    return kinds


# Passages that once contradicted their own outputs, each with the code and output beside it then.
CONTRADICTIONS = [
    (
        "The vocabulary is tiny and nothing is unknown.",
        "print(len(alphabet))",
        "de: 99 distinct characters",
        {"absolute"},
        False,
    ),
    (
        "Byte-pair encoding keeps frequent words whole and spells out the rest, with no unknown tokens.",
        "assert not any(UNK_ID in s for s in ids)",
        "",
        {"absolute"},
        True,
    ),
    (
        "Its frequency falls geometrically from 1 radian per position to $1/10000$.",
        "return 2 * math.pi * 10000 ** (2 * i / d_model)",
        "wavelength(512) = 60,611 positions",
        {"number"},
        False,
    ),
    (
        "With a matrix that stretches vectors by 1.2, the gradient after $T$ steps grows like $1.2^T$:",
        "W = (1.2 * rotation).requires_grad_()",
        "T = 20: gradient norm 1.2e+04\nT = 40: gradient norm 3.3e+07",
        {"number"},
        False,
    ),
    (
        'Whitespace splitting keeps "street." as one token; `13a` splits it into "street" and ".".',
        "print(references[0])",
        "A group of men are loading cotton onto a truck",
        {"example"},
        False,
    ),
    (
        "Cooled to $T = 0.1$ it never starts with `B`, like greedy.",
        'assert greedy_b < 0.05 and greedy_distinct == 1\nassert profile["sample, T = 0.1"][0] < 0.05',
        "sample, T = 0.1   1%   1%   18",
        {"absolute"},
        False,
    ),
    (
        "In the stored run they were about five times slower than the fused kernel.",
        "print(name, mib, ms)",
        "tiled (ours)    12   175\nfused            6   103",
        {"ratio"},
        False,
    ),
    (
        "On the CPU that stored these outputs, the autocast step took about 1.7 times as long as the float32 one.",
        "print(step_ms)",
        "float32 step 46 ms, bfloat16 autocast step 108 ms",
        {"ratio", "number"},
        False,
    ),
    (
        "Some rows were measured twice and differed by up to a fifth (503k and 426k tokens/s).",
        "print(rows)",
        "small 8192 bf16  174k\nsmall 8192 bf16  235k",
        {"number"},
        False,
    ),
    (
        "Training the copy task takes about 40 seconds on a laptop.",
        "losses = train(model, steps=300)",
        "step 300: loss 0.02",
        {"number"},
        False,
    ),
]


@pytest.mark.parametrize(
    "markdown, code, outputs, kinds, summary", CONTRADICTIONS, ids=[c[0][:40] for c in CONTRADICTIONS]
)
def test_the_check_finds_passages_that_contradicted_their_outputs(markdown, code, outputs, kinds, summary):
    assert kinds <= findings_in(markdown, code, outputs, summary=summary)


def test_the_check_passes_what_the_outputs_show():
    assert not findings_in("Attention is $2.3 \\times$ faster: 4.6 ms against 10.6 ms.", "", "4.6 ms\n10.6 ms\n2.3×")
    assert not findings_in("The check asserts about five times.", "assert 4 < ratio < 6", "")
    assert not findings_in("It never fails.", "assert failures == 0", "")
    assert not findings_in("An encoder layer: $4(512^2 + 512) = 1{,}050{,}624$ weights.", "", "")
    assert findings_in("An encoder layer: $4(512^2 + 512) = 1{,}050{,}000$ weights.", "", "") == {"number"}
    assert not findings_in("A quarter of the sentences.", "", "25% of test sentences")
    assert not findings_in("Each run trains for 20 minutes.", 'config = {"minutes": 20}', "")


if __name__ == "__main__":
    for finding in all_findings():
        print(finding)
