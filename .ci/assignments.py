"""Build every assignment and check its autograder against known submissions, without Docker.

    python .ci/assignments.py                       # build into _build/assignments, grade, check
    python .ci/assignments.py --record results/coursework   # also write the record the instructors' page shows

For each assignment (``python -m transformer_lib assign``): the student notebook holds no hidden
test and no solution; the solution scores full marks; the untouched student notebook scores 0 on
every auto-graded question and is still graded; each submission of ``assignments/mistakes.yaml``
(the solution with a mistake seeded, or broken: a syntax error, an endless loop, a missing import)
loses the points of the question it breaks and keeps every other question's, and one that changes
a library the tests use, or hands in the references, gets no points from them. Solutions are graded
one at a time and timed (the instructors' page reports those times); the rest two at a time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
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

from transformer_lib import utils  # noqa: E402
from transformer_lib.coursework import grading  # noqa: E402
from transformer_lib.data import load_multi30k  # noqa: E402
from transformer_lib.files import write_text  # noqa: E402

CAPSTONE_TRANSLATIONS = ROOT / "results/multi30k/cpu/de_en/test_2016_flickr.hyp.txt"  # lesson 11's CPU run


def seeded(solution: Path, spec: dict, out: Path) -> Path:
    """The solution with each [text, replacement] of ``spec`` applied to the first cell holding the text."""
    notebook = nbformat.read(solution, as_version=4)
    for old, new in spec.get("replace", []):
        cell = next((c for c in notebook.cells if old in c.source), None)
        if cell is None:
            raise SystemExit(f"mistakes.yaml, {spec['name']}: {old!r} is not in {solution.name}")
        cell.source = cell.source.replace(old, new, 1)
    path = out / f"{spec['name']}.ipynb"
    nbformat.write(notebook, path)
    return path


def with_translations(notebook: Path, out: Path, name: str, shift: int = 0, references: bool = False) -> Path:
    """A zip as the capstone's export cell writes it: the notebook and its translations file.

    For the seeded mistakes: ``shift`` lines out of place, or the test set's ``references`` themselves.
    """
    if references:
        lines = load_multi30k("test_2016_flickr", "en")
    else:
        lines = CAPSTONE_TRANSLATIONS.read_text(encoding="utf-8").splitlines()
        lines = lines[shift:] + lines[-1:] * shift
    path = out / f"{name}.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.write(notebook, notebook.name)
        archive.writestr("translations.de-en.txt", "\n".join(lines) + "\n")
    return path


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
    built = grading.build(ROOT / "assignments", out)
    print(f"built {len(built)} assignments in {time.monotonic() - started:.0f} s")
    mistakes = yaml.safe_load((ROOT / "assignments/mistakes.yaml").read_text(encoding="utf-8"))
    submissions = out / "_submissions"
    submissions.mkdir(exist_ok=True)

    problems, jobs, solutions = [], [], []
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
            solution = with_translations(solution, mine, "solution")
        solutions.append((name, zipped, solution))
        jobs.append((name, zipped, student, "student notebook", None))
        for spec in mistakes.get(name, []):
            if "shift_translations" in spec or "references" in spec:
                path = with_translations(
                    folder / "autograder" / f"{name}.ipynb",
                    mine,
                    spec["name"],
                    spec.get("shift_translations", 0),
                    spec.get("references", False),
                )
            else:
                path = seeded(folder / "autograder" / f"{name}.ipynb", spec, mine)
            loses = None if spec["loses"] == "all" else spec["loses"]  # None: zero everywhere
            jobs.append((name, zipped, path, spec["name"], loses))

    record = {"assignments": {}, "submissions": []}
    for name, zipped, path in solutions:  # one at a time: their times go on the instructors' page
        start = time.monotonic()
        scores = grading.grade_one(zipped, path)
        seconds = time.monotonic() - start
        possible = {s.question: s.possible for s in scores}
        record["assignments"][name] = {
            "questions": possible,
            "points": sum(possible.values()),
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

    def run(job):
        _, zipped, path, _, _ = job
        start = time.monotonic()
        return job, grading.grade_one(zipped, path), time.monotonic() - start

    with ThreadPoolExecutor(max_workers=2) as pool:
        for (name, _, _, label, loses), scores, seconds in pool.map(run, jobs):
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
                    if s.points < s.possible and not s.message.startswith(("Wrong", "AssertionError"))
                ]
            elif loses is not None:
                if got[loses] >= possible[loses]:
                    problems.append(f"{name} {label}: {loses} kept all its points")
                problems += [
                    f"{name} {label}: {q} lost points ({got[q]:g}/{possible[q]:g})"
                    for q in possible
                    if q != loses and got[q] != possible[q]
                ]
            why = {s.question: s.message for s in scores if s.points < s.possible}
            record["submissions"].append(
                {"assignment": name, "submission": label, "seconds": round(seconds, 1), "scores": got, "why": why}
            )
            lost = f", {loses}: {why.get(loses, '')}" if loses else ""
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
    lines = [f"{'assignment':<20} {'points':>6}  {'per question':<24} solution graded in"]
    for name, a in record["assignments"].items():
        questions = ", ".join(f"{q} {p:g}" for q, p in a["questions"].items())
        lines.append(f"{name:<20} {a['points']:>6g}  {questions:<24} {a['solution_seconds']:>5.0f} s")
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
