"""Build every assignment and check its autograder against known submissions, without Docker.

    python .ci/assignments.py                       # build into _build/assignments, grade, check
    python .ci/assignments.py --record results/coursework   # also write the record the instructors' page shows

First, in one process and in seconds, every answer of ``assignments/variants.yaml``: each correct
one (written differently from the master's) must get full marks, each wrong one (a mistake students
make) must lose all of its question's points and no other's; a table says, for each question, how
many of its wrong answers it catches.

Then, built with Otter (``python -m book_tools assign``) and graded as ``grade`` grades (each
submission's code in a sandbox, the tests apart), for each assignment: the student notebook holds
no hidden test and no solution; the solution scores full marks; the untouched student notebook
scores 0 on every auto-graded question and is still graded; each submission of
``assignments/mistakes.yaml`` (the solution with a mistake seeded, or broken: a syntax error, an
endless loop, a missing import) scores 0 on the question it breaks and keeps every other question's
points; each hostile one (it writes or reads the tests, hooks the results, patches the libraries,
outlives its notebook, swallows the time limit, floods the output, opens the network, fills the
disk, rewrites its handed-in file) is graded to what its answers earn, and its row of what was
refused says what it tried; one that hands in the references gets no points; the solution with
every question answered by its first correct variant (the capstone: its first correct translations
file) scores full marks, as the fast check said. Everything is graded two at a time, but for
``--record``, where the solutions are graded one at a time and timed (the instructors' page reports
those times).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import torch
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from book_tools.coursework import gradescope, grading, variants  # noqa: E402
from transformer_lib import utils  # noqa: E402
from transformer_lib.files import write_text  # noqa: E402


def seeded(solution: Path, spec: dict, out: Path) -> Path:
    """The solution with each [text, replacement] of ``spec`` applied to the first cell holding the text."""
    notebook = nbformat.read(solution, as_version=4)
    for old, new in spec.get("replace", []):
        cell = next((c for c in notebook.cells if old in c.source), None)
        if cell is None:
            raise SystemExit(f"mistakes.yaml, {spec['name']}: {old!r} is not in {solution.name}")
        cell.source = cell.source.replace(old, new, 1)
    if "new_cell" in spec:  # a cell of its own, before the export cell: it may cost no question's points
        notebook.cells.insert(len(notebook.cells) - 1, nbformat.v4.new_code_cell(spec["new_cell"]))
    path = out / f"{spec['name']}.ipynb"
    nbformat.write(notebook, path)
    return path


def with_translations(notebook: Path, out: Path, name: str, spec: dict) -> Path:
    """A zip as the capstone's export cell writes it: the notebook and a translations file.

    The file is lesson 11's recorded translations changed as ``spec`` says (variants.handed_in): ``{}``
    for the solution's, a seeded mistake's, or the first correct variant's.
    """
    path = out / f"{name}.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.write(notebook, notebook.name)
        archive.writestr(variants.HANDED_IN, variants.handed_in(spec))
    return path


def with_correct_variants(solution: Path, spec: dict, out: Path) -> Path:
    """The solution with each question's cell replaced by its first correct variant (variants.yaml)."""
    notebook = nbformat.read(solution, as_version=4)
    master = variants.read_master(ROOT / "assignments" / solution.stem / solution.name)
    for question, kinds in spec.items():
        original = master.questions[question].solution
        first = original.strip().splitlines()[0]  # "def attention(q, k, v, mask=None):"
        cell = next((c for c in notebook.cells if c.cell_type == "code" and first in c.source), None)
        if cell is None:
            raise SystemExit(f"variants.yaml, {solution.stem} {question}: no cell of the solution holds {first!r}")
        cell.source = variants.replaced(original, next(iter(kinds["correct"].values())))
    path = out / "correct_variants.ipynb"
    nbformat.write(notebook, path)
    return path


# Hostile submissions also graded as Gradescope's run script grades them, besides every solution.
ON_GRADESCOPE = ("hooks_the_results", "writes_the_tests", "rewrites_the_handed_in_file")


def check_variants(spec: dict) -> list[str]:
    """Grade every answer of variants.yaml in this process; print the table; the problems found."""
    start = time.monotonic()
    masters = {m.parent.name: m for m in grading.masters(ROOT / "assignments")}
    verdicts = variants.check(masters, spec)
    print(variants.caught_table(verdicts))
    print(f"graded {len(verdicts)} answers of variants.yaml in {time.monotonic() - start:.0f} s")
    return [problem for v in verdicts for problem in v.problems]


def on_gradescope(zipped: Path, submission: Path) -> dict[str, float]:
    """Each question's points as Gradescope's run script gives them: the zip unpacked into source/, the
    submission (a zip unpacked, as Gradescope unpacks an upload) into submission/, results/results.json read."""
    with tempfile.TemporaryDirectory() as root:
        with zipfile.ZipFile(zipped) as archive:
            archive.extractall(Path(root, "source"))
        handed = Path(root, "submission")
        handed.mkdir()
        if submission.suffix == ".zip":
            with zipfile.ZipFile(submission) as archive:
                archive.extractall(handed)
        else:
            shutil.copy(submission, handed)
        run = subprocess.run(
            [sys.executable, str(Path(root, "source", "run_otter.py"))],
            env={**os.environ, gradescope.ROOT_VARIABLE: root},
            capture_output=True,
            text=True,
        )
        if run.returncode:
            return {"run_otter.py failed": run.stderr.strip().splitlines()[-1:]}
        report = json.loads(Path(root, "results", "results.json").read_text(encoding="utf-8"))
    return {t["name"]: t["score"] for t in report["tests"] if t["name"] != grading.NOTES_ROW}


def hidden_tests_leak(built: Path) -> list[str]:
    """Hidden tests named in the student notebook (its cells or the public tests it carries): none may be."""
    student = (built / "student" / f"{built.name}.ipynb").read_text(encoding="utf-8")
    leaks = [f"{built.name}: the student notebook carries a hidden test case"] if "hidden=True" in student else []
    with zipfile.ZipFile(built / "autograder" / "autograder.zip") as archive:
        for name in (n for n in archive.namelist() if n.startswith("tests/")):
            for block in archive.read(name).decode().split("@test_case(")[1:]:
                header, _, body = block.partition("\n")
                test = body.strip().partition("(")[0]  # "def test_name"
                if "hidden=True" in header and test in student:
                    leaks.append(f"{built.name}/{name}: {test} is in the student notebook")
    return leaks


def solutions_leak(built: Path) -> bool:
    student = (built / "student" / f"{built.name}.ipynb").read_text(encoding="utf-8")
    return "BEGIN SOLUTION" in student or "END SOLUTION" in student


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "_build/assignments"))
    parser.add_argument("--record", help="write grading.json and grading.txt into this folder")
    args = parser.parse_args()
    out = Path(args.out)
    started = time.monotonic()
    answers = yaml.safe_load((ROOT / "assignments/variants.yaml").read_text(encoding="utf-8"))
    problems = check_variants(answers)
    built = grading.build(ROOT / "assignments", out)
    print(f"built {len(built)} assignments in {time.monotonic() - started:.0f} s")
    mistakes = yaml.safe_load((ROOT / "assignments/mistakes.yaml").read_text(encoding="utf-8"))
    submissions = out / "_submissions"
    submissions.mkdir(exist_ok=True)

    jobs, solutions = [], []
    for folder in built:
        name = folder.name
        zipped = folder / "autograder" / "autograder.zip"
        problems += hidden_tests_leak(folder)
        if solutions_leak(folder):
            problems.append(f"{name}: the student notebook holds a solution")
        mine = submissions / name
        mine.mkdir(exist_ok=True)
        solution, student = folder / "autograder" / f"{name}.ipynb", folder / "student" / f"{name}.ipynb"
        capstone = name == "a6_capstone"
        if capstone:
            solution = with_translations(solution, mine, "solution", {})
        solutions.append((name, zipped, solution))
        jobs.append((name, zipped, student, "student notebook", None, ""))
        for spec in mistakes.get(name, []):
            if capstone:  # the solution (or its notebook changed) with translations, as the export cell zips them
                changes = {"shift": spec.get("shift_translations", 0), "references": spec.get("references", False)}
                notebook = folder / "autograder" / f"{name}.ipynb"
                if "replace" in spec or "new_cell" in spec:
                    notebook = seeded(notebook, spec, mine)
                path = with_translations(notebook, mine, spec["name"], changes)
            else:
                path = seeded(folder / "autograder" / f"{name}.ipynb", spec, mine)
            loses = None if spec["loses"] == "all" else spec["loses"]  # None: zero everywhere; "": nothing lost
            jobs.append((name, zipped, path, spec["name"], loses, spec.get("refused", "")))
        if capstone and name in answers:  # its answer is a file: the first correct one, beside the solution
            first = next(iter(answers[name]["q1"]["correct"].values()))
            path = with_translations(folder / "autograder" / f"{name}.ipynb", mine, "correct_variants", first)
            jobs.append((name, zipped, path, "the first correct translations file", "", ""))
        elif name in answers:  # Otter must agree with the fast check: full marks
            path = with_correct_variants(folder / "autograder" / f"{name}.ipynb", answers[name], mine)
            jobs.append((name, zipped, path, "every question's first correct variant", "", ""))

    def grade(solution):
        name, zipped, path = solution
        start = time.monotonic()
        return name, grading.grade_one(zipped, path), time.monotonic() - start

    record = {"assignments": {}, "submissions": []}
    # A record's solutions are graded one at a time (their times go on the instructors' page), CI's two.
    with ThreadPoolExecutor(max_workers=1 if args.record else 2) as pool:
        graded = list(pool.map(grade, solutions))
    for name, scores, seconds in graded:
        by_hand = {s.question: s.possible for s in scores if s.by_hand}
        problems += [f"{name} solution: nothing should be refused, it says '{s.message}'" for s in scores if s.note]
        scores = [s for s in scores if not s.by_hand and not s.note]
        possible = {s.question: s.possible for s in scores}
        record["assignments"][name] = {
            "questions": possible,
            "points": sum(possible.values()),
            "by_hand": by_hand,
            "solution_seconds": round(seconds, 1),
        }
        problems += [
            f"{name} solution: {s.question} {s.points:g}/{s.possible:g}: {s.message}"
            for s in scores
            if s.points != s.possible or s.question == "-"
        ]
        record["submissions"].append(
            {
                "assignment": name,
                "submission": "solution",
                "seconds": round(seconds, 1),
                "scores": {s.question: s.points for s in scores},
            }
        )
        print(f"{name}: solution {sum(s.points for s in scores):g}/{sum(possible.values()):g} in {seconds:.0f} s")
        gradescope_scores = on_gradescope(*next((z, p) for n, z, p in solutions if n == name))
        if gradescope_scores != {s.question: s.points for s in scores}:
            problems.append(f"{name} solution on Gradescope: {gradescope_scores}, grade gives the points in full")

    def run(job):
        _, zipped, path, *_ = job
        start = time.monotonic()
        scores = [s for s in grading.grade_one(zipped, path) if not s.by_hand]
        return job, scores, time.monotonic() - start

    zipped_of = {name: zipped for name, zipped, _ in solutions}
    path_of = {(name, label): path for name, _, path, label, *_ in jobs}
    with ThreadPoolExecutor(max_workers=2) as pool:
        for (name, _, _, label, loses, refused), graded_scores, seconds in pool.map(run, jobs):
            scores = [s for s in graded_scores if not s.note]
            said = next((s.message for s in graded_scores if s.note), "")
            if refused and refused not in said:
                problems.append(f"{name} {label}: its '{grading.NOTES_ROW}' row should say '{refused}', says '{said}'")
            elif said and not refused:
                problems.append(
                    f"{name} {label}: nothing should be refused, its '{grading.NOTES_ROW}' row says '{said}'"
                )
            possible = record["assignments"][name]["questions"]
            got = {s.question: s.points for s in scores}
            if set(got) != set(possible):
                problems.append(f"{name} {label}: graded questions {sorted(got)}, expected {sorted(possible)}")
            elif loses is None and any(got.values()):
                problems.append(f"{name} {label}: scored {got}, expected 0 everywhere")
            if label == "student notebook":  # each test says what is missing; none crashes on a stub's None
                problems += [
                    f"{name} student notebook: {s.question} says '{s.message}', not what is missing"
                    for s in scores
                    if s.points < s.possible
                    and not re.sub(r"^test_\w+: ", "", s.message).startswith(("Wrong", "AssertionError"))
                ]
            elif loses is not None:
                if loses and got[loses]:
                    problems.append(f"{name} {label}: {loses} kept {got[loses]:g} of its {possible[loses]:g} points")
                problems += [
                    f"{name} {label}: {q} lost points ({got[q]:g}/{possible[q]:g})"
                    for q in possible
                    if q != loses and got[q] != possible[q]
                ]
            why = {s.question: s.message for s in scores if s.points < s.possible}
            record["submissions"].append(
                {"assignment": name, "submission": label, "seconds": round(seconds, 1), "scores": got, "why": why}
                | ({"refused": said} if said else {})
            )
            if label in ON_GRADESCOPE:  # Gradescope's run script protects as grade does
                gradescope_scores = on_gradescope(zipped_of[name], path_of[name, label])
                if gradescope_scores != got:
                    problems.append(f"{name} {label} on Gradescope: {gradescope_scores}, grade gives {got}")
            lost = f", {loses}: {why.get(loses, '')}" if loses else ""
            lost += f"; {grading.NOTES_ROW}: {said}" if said else ""
            print(f"{name}: {label} {sum(got.values()):g}/{sum(possible.values()):g} in {seconds:.0f} s{lost}")

    total = time.monotonic() - started
    print(f"graded {len(solutions) + len(jobs)} submissions in {total:.0f} s")
    if args.record:
        record["environment"] = environment(total)
        write_record(Path(args.record), record)
    for problem in problems:
        print("PROBLEM:", problem)
    return 1 if problems else 0


def environment(total: float) -> dict:
    """Where and when the record was made: the package's environment record, with the cores and the time taken."""
    return {**utils.environment(torch.device("cpu")), "cores": os.cpu_count(), "total_seconds": round(total)}


def write_record(folder: Path, record: dict) -> None:
    """grading.json (everything) and grading.txt (the table the instructors' page includes)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [f"{'assignment':<20} {'points':>6}  {'per question (by hand)':<32} solution graded in"]
    for name, a in record["assignments"].items():
        by_hand = a.get("by_hand", {})
        questions = ", ".join(
            [f"{q} {p:g}" for q, p in a["questions"].items()] + [f"({q} {p:g})" for q, p in by_hand.items()]
        )
        points = a["points"] + sum(by_hand.values())
        lines.append(f"{name:<20} {points:>6g}  {questions:<32} {a['solution_seconds']:>5.0f} s")
    lines += ["", f"{'submission':<52} {'points':>6}  graded in"]
    for s in record["submissions"]:
        if s["submission"] == "solution":
            continue
        possible = record["assignments"][s["assignment"]]["points"]
        points = f"{sum(s['scores'].values()):g}/{possible:g}"
        lines.append(f"{s['assignment'] + ': ' + s['submission']:<52} {points:>6}  {s['seconds']:>5.0f} s")
        if s["submission"] != "student notebook":  # what it lost, in the autograder's words, once per message
            questions: dict[str, list[str]] = {}
            for question, message in s["why"].items():
                questions.setdefault(message, []).append(question)
            for message, asked in questions.items():
                lines += textwrap.wrap(
                    f"{', '.join(asked)}: {message}", 86, initial_indent="  ", subsequent_indent="    "
                )
            if s.get("refused"):
                lines += textwrap.wrap(
                    f"{grading.NOTES_ROW}: {s['refused']}", 86, initial_indent="  ", subsequent_indent="    "
                )
    env = record["environment"]
    lines.append("")
    summary = (
        f"{env['started_utc'][:16].replace('T', ' ')} UTC, commit {env['git_commit'][:7]}, {env['cores']} cores, "
        f"Python {env['python']}; everything built and graded in {env['total_seconds']} s"
    )
    lines += textwrap.wrap(summary, 88)
    write_text(folder / "grading.json", json.dumps(record, indent=2) + "\n")
    write_text(folder / "grading.txt", "\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
