"""Grade many answers to the assignments' questions in one process, without Otter: seconds, not hours.

An autograder is only as good as the answers it has been tried on. ``assignments/variants.yaml``
holds, for each auto-graded question, correct answers written differently from the master's (they
must get full marks) and wrong ones, each a mistake students make (they must lose all of that
question's points and no other's). :func:`grade_answer` runs a master's setup cells and solutions,
with one question's solution replaced by the answer, then every question's tests on the
namespace's names: the same tests and points, in a fraction of the time (``grade`` starts a
sandboxed process per submission). Whole submissions graded as ``grade`` grades them stay in
``.ci/assignments.py``.

The capstone's answer is a file, not code: its variants are translations files (:func:`handed_in`),
each written into an empty folder and graded there by the master's tests, as Otter grades the file
handed in beside the notebook.
"""

from __future__ import annotations

import ast
import contextlib
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import yaml

from transformer_lib import records
from transformer_lib.errors import InvalidValue

_CONFIG = re.compile(r'""" # BEGIN TEST CONFIG\n(.*?)"""  # END TEST CONFIG', re.S)


@dataclass
class Test:
    """One test function of a question, as the master writes it."""

    name: str
    source: str
    hidden: bool
    points: float | None  # None: Otter shares the question's points left over among such tests


@dataclass
class Question:
    name: str
    points: float
    manual: bool
    solution: str = ""  # the cell between BEGIN SOLUTION and END SOLUTION
    tests: list[Test] = field(default_factory=list)

    def test_points(self) -> dict[str, float]:
        """Each test's points, resolved as Otter does: the question's points not given to a test are shared."""
        given = sum(t.points for t in self.tests if t.points is not None)
        open_tests = [t for t in self.tests if t.points is None]
        share = (self.points - given) / len(open_tests) if open_tests else 0.0
        return {t.name: (t.points if t.points is not None else share) for t in self.tests}


@dataclass
class Master:
    path: Path
    setup: list[str]  # code cells before the first question, less the install and Otter cells
    questions: dict[str, Question]


def read_master(path: str | Path) -> Master:
    """A master notebook's setup cells and its questions: each one's solution cell and tests."""
    path = Path(path)
    cells = nbformat.read(path, as_version=4).cells
    setup: list[str] = []
    questions: dict[str, Question] = {}
    current: Question | None = None
    state = ""  # "solution" or "tests" inside a question
    for cell in cells:
        text = cell.source
        if cell.cell_type == "raw":
            if text.startswith("# BEGIN QUESTION"):
                config = yaml.safe_load(text.split("\n", 1)[1])
                current = Question(config["name"], float(config.get("points", 0)), bool(config.get("manual")))
                questions[current.name] = current
            elif text.startswith("# END QUESTION"):
                current = None
            elif text.startswith("# BEGIN SOLUTION"):
                state = "solution"
            elif text.startswith("# BEGIN TESTS"):
                state = "tests"
            elif text.startswith(("# END SOLUTION", "# END TESTS")):
                state = ""
            continue
        if cell.cell_type != "code" or "otter_ignore" in cell.metadata.get("tags", []):
            continue  # Otter's autograder skips a cell tagged otter_ignore (the capstone's training)
        if current is None:
            if not questions and "otter" not in text and "importlib" not in text:
                setup.append(text)
        elif state == "solution":
            current.solution = text
        elif state == "tests":
            found = _CONFIG.search(text)
            config = yaml.safe_load(found[1]) if found else {}
            name = re.search(r"^def (\w+)\(", text, re.M)[1]
            current.tests.append(Test(name, text, bool(config.get("hidden")), config.get("points")))
    return Master(path, setup, questions)


@dataclass
class Result:
    """One test's verdict on an answer."""

    question: str
    test: str
    hidden: bool
    points: float
    possible: float
    message: str  # "passed", or the first line of what failed


def _run(source: str, namespace: dict, what: str) -> None:
    """Run a cell; one that fails stops there, as a student's would, and the tests say what is missing."""
    with contextlib.suppress(Exception):
        exec(compile(source, what, "exec"), namespace)


def grade_answer(master: Master, question: str | None = None, answer: str | None = None) -> list[Result]:
    """Every test of every auto-graded question, with ``question``'s solution cell replaced by ``answer``.

    The cells run in one namespace, in the master's order, as a submission's do; a cell that fails
    leaves what it did not define undefined (tests then pass None, as Otter does for a missing name).
    """
    namespace: dict = {"__name__": "__main__"}
    for index, source in enumerate(master.setup):
        _run(source, namespace, f"setup cell {index + 1}")
    for q in master.questions.values():
        if q.solution:
            _run(answer if q.name == question and answer is not None else q.solution, namespace, q.name)
    results = []
    for q in master.questions.values():
        if q.manual or (question and q.name != question and not _touches(master.questions[question], answer, q)):
            continue
        points = q.test_points()
        for test in q.tests:
            scope: dict = {"__name__": f"tests_{q.name}"}
            exec(compile(test.source, f"{q.name}/{test.name}", "exec"), scope)
            function = scope[test.name]
            names = function.__code__.co_varnames[: function.__code__.co_argcount]
            try:
                function(*[namespace.get(name) for name in names])
                message = "passed"
            except Exception as error:
                message = f"{type(error).__name__}: {error}".splitlines()[0]
            passed = message == "passed"
            results.append(
                Result(q.name, test.name, test.hidden, points[test.name] if passed else 0.0, points[test.name], message)
            )
    return results


def _defines(source: str) -> set[str]:
    """The names a cell binds at its top level (its functions, classes, variables, imports)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        else:
            names.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    return names


def _touches(question: Question, answer: str | None, other: Question) -> bool:
    """Whether an answer to ``question`` can change how ``other`` is graded: ``other``'s solution or tests
    use a name the answer (or the solution it replaces) binds. Other questions are graded as the master's."""
    names = _defines(question.solution) | _defines(answer or "")
    text = other.solution + "".join(t.source for t in other.tests)
    return any(re.search(rf"\b{re.escape(name)}\b", text) for name in names)


def replaced(solution: str, spec: str | list) -> str:
    """An answer: the code given, or the solution with each [text, replacement] of the list applied."""
    if isinstance(spec, str):
        return spec
    for old, new in spec:
        if old not in solution:
            raise InvalidValue(f"{old!r} is not in the solution")
        solution = solution.replace(old, new, 1)
    return solution


ROOT = Path(__file__).resolve().parents[3]  # the repository: the records a file variant starts from
CAPSTONE_TRANSLATIONS = "results/multi30k/cpu/de_en/test_2016_flickr.hyp.txt"  # lesson 11's CPU run
HANDED_IN = "translations.de-en.txt"  # the file the capstone's solution names and its export cell zips
_FILE_CHANGES = {
    "translations",
    "references",
    "sources",
    "shift",
    "lines",
    "padded",
    "crlf",
    "final_newline",
    "copied",
    "disguise",
}
_DISGUISES = {  # how a copied reference line is disguised: each must still count as a copy
    "doubled_spaces": lambda line: line.replace(" ", "  "),
    "lowercase_tokenised": lambda line: re.sub(r"\s*([.,!?;:])", r" \1", line.lower()),
    "full_width": lambda line: "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in line),
    "one_word_changed": lambda line: re.sub(r"\b(a|the)\b", lambda m: "the" if m[1] == "a" else "a", line, count=1),
    "words_inserted": lambda line: " ".join(w + " wonderfully" * (i % 4 == 1) for i, w in enumerate(line.split())),
}


def handed_in(spec: dict) -> str:
    """The text of a capstone translations file: the solution's, changed as ``spec`` says.

    The lines are a record's (``translations``: a path under ``results/``; lesson 11's recorded
    ``test_2016_flickr`` translations unless given), or test_2016_flickr's English ``references`` or
    German ``sources``; then the first ``copied`` share of lines replaced by their references, each
    disguised as ``disguise`` says (``_DISGUISES``); then ``shift`` lines out of place (the last
    line repeated at the end), the first ``lines`` kept, each ``padded`` with spaces at both ends,
    ``crlf`` line ends, and no final line end when ``final_newline`` is false.
    """
    unknown = set(spec) - _FILE_CHANGES
    if unknown:
        raise InvalidValue(f"variants.yaml: unknown file change {sorted(unknown)}; known: {sorted(_FILE_CHANGES)}")
    if spec.get("references") or spec.get("sources"):
        from transformer_lib.data import load_multi30k  # only the capstone's variants need the data

        lines = load_multi30k("test_2016_flickr", "en" if spec.get("references") else "de")
    else:
        lines = records.read_text(ROOT / spec.get("translations", CAPSTONE_TRANSLATIONS)).splitlines()
    if spec.get("copied"):  # the first share of lines replaced by their references, disguised
        from transformer_lib.data import load_multi30k

        references = load_multi30k("test_2016_flickr", "en")
        disguise = _DISGUISES[spec.get("disguise", "doubled_spaces")]
        count = round(spec["copied"] * len(lines))
        lines = [disguise(r) for r in references[:count]] + lines[count:]
    shift = spec.get("shift", 0)
    lines = (lines[shift:] + lines[-1:] * shift)[: spec.get("lines", len(lines))]
    if spec.get("padded"):
        lines = [f"  {line} " for line in lines]
    end = "\r\n" if spec.get("crlf") else "\n"
    text = end.join(lines)
    return text + end if lines and spec.get("final_newline", True) else text


def grade_file(master: Master, question: str, spec: dict) -> list[Result]:
    """Every test of ``master`` (the capstone's), with the master's own answer and the file :func:`handed_in`
    makes of ``spec`` lying beside the notebook: in a new empty folder, the current one while grading."""
    text = handed_in(spec)
    with tempfile.TemporaryDirectory() as folder, contextlib.chdir(folder):
        (Path(folder) / HANDED_IN).write_bytes(text.encode("utf-8"))  # bytes: line ends as written
        return grade_answer(master, question, master.questions[question].solution)


@dataclass
class Verdict:
    """A variant graded: its question's points, and the problems a correct grader would not have."""

    assignment: str
    question: str
    kind: str  # "correct" or "wrong"
    name: str
    points: float
    possible: float
    why: str  # the first failing test's message on its question ("" when none failed)
    problems: list[str]


def check(masters: dict[str, Path], spec: dict) -> list[Verdict]:
    """Grade every variant of ``spec`` (``variants.yaml``'s content) against its assignment's master.

    A variant is code (a string, or [text, replacement] pairs), or a dict: a file :func:`handed_in` makes.
    """
    verdicts = []
    for assignment, questions in spec.items():
        master = read_master(masters[assignment])
        for question, kinds in questions.items():
            if question not in master.questions:
                raise InvalidValue(f"variants.yaml: {assignment} has no question {question}")
            for kind, variants in kinds.items():
                for name, variant in variants.items():
                    if isinstance(variant, dict):
                        results = grade_file(master, question, variant)
                    else:
                        results = grade_answer(master, question, replaced(master.questions[question].solution, variant))
                    verdicts.append(_verdict(assignment, question, kind, name, results))
    return verdicts


def _verdict(assignment: str, question: str, kind: str, name: str, results: list[Result]) -> Verdict:
    label = f"{assignment} {question} {kind} {name}"
    mine = [r for r in results if r.question == question]
    points, possible = sum(r.points for r in mine), sum(r.possible for r in mine)
    failed = [r for r in mine if r.message != "passed"]
    why = next((r.message for r in failed if r.possible), failed[0].message if failed else "")
    problems = []
    if kind == "correct":
        problems += [f"{label}: {r.test} failed: {r.message}" for r in failed]
    elif points:
        problems.append(f"{label}: kept {points:g}/{possible:g}")
    elif not failed:
        problems.append(f"{label}: passed every test")
    for r in results:
        if r.question != question and r.message != "passed":
            problems.append(f"{label}: {r.question}'s {r.test} failed too: {r.message}")
    return Verdict(assignment, question, kind, name, points, possible, why, problems)


def caught_table(verdicts: list[Verdict]) -> str:
    """Question × wrong answers caught (scored 0 on the question), and correct answers given full marks."""
    rows: dict[tuple[str, str], list[int]] = {}
    for v in verdicts:
        row = rows.setdefault((v.assignment, v.question), [0, 0, 0, 0])
        if v.kind == "wrong":
            row[0] += not v.points
            row[1] += 1
        else:
            row[2] += v.points == v.possible and not v.problems
            row[3] += 1
    lines = [f"{'assignment':<20} {'question':<8} {'wrong caught':>12} {'correct full marks':>18}"]
    for (assignment, question), (caught, wrong, full, correct) in rows.items():
        lines.append(f"{assignment:<20} {question:<8} {f'{caught}/{wrong}':>12} {f'{full}/{correct}':>18}")
    return "\n".join(lines)
