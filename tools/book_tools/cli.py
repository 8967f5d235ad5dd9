"""The tools' command line: the assignments, their grading, the website's export, sweeps.

For example::

    python -m book_tools assign assignments --out _build/assignments   # Otter: student, solution, autograder
    python -m book_tools grade _build/assignments/a2_attention/autograder/autograder.zip submissions/ --csv a2.csv
    python -m book_tools export-onnx runs/NAME exported/de_en          # ONNX files for a browser (book: translator)
    python -m book_tools sweep experiments/multi30k/sweep2_final.yaml --out runs/sweep2 --jobs 2 --archive s2.tar.gz

Training one run, translating and scoring are the library's: ``python -m transformer_lib train`` and friends.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from book_tools import sweep
from book_tools.web.export import PRECISIONS, export_onnx
from transformer_lib.cli import run_command, utf8_console
from transformer_lib.cli.commands import parse_device
from transformer_lib.errors import InvalidValue


def cmd_export_onnx(args: argparse.Namespace) -> None:
    out = export_onnx(args.checkpoint, args.out, args.precision)
    sizes = ", ".join(f"{f.name} {f.stat().st_size / 1e6:.1f} MB" for f in sorted(out.iterdir()))
    print(f"exported to {out}: {sizes}")


def cmd_assign(args: argparse.Namespace) -> None:
    from book_tools.coursework import grading  # Otter-Grader, which the book's requirements install

    for folder in grading.build(args.folder, args.out, run_tests=args.run_tests, release=args.release):
        print(f"{folder}: student/{folder.name}.ipynb, autograder/{folder.name}.ipynb (the solution), autograder.zip")


def cmd_grade(args: argparse.Namespace) -> None:
    from book_tools.coursework import grading

    print(grading.table(grading.grade(args.autograder, args.submissions, args.csv, args.timeout)))
    if args.csv:
        print(f"written to {args.csv}")


def cmd_sweep(args: argparse.Namespace) -> None:
    for flag in ("jobs", "threads"):
        if getattr(args, flag) < 1:
            raise InvalidValue(f"--{flag} must be at least 1, got {getattr(args, flag)}")
    parse_device(args.device)  # here, once, rather than in every run's process after they have started
    summary = sweep.run_sweep(args.file, args.out, args.jobs, args.device, threads=args.threads, only=args.runs)
    print(sweep.table(summary))
    if args.archive:
        print(f"packed into {sweep.pack(args.out, args.archive)}")


def cmd_pack(args: argparse.Namespace) -> None:
    print(f"packed into {sweep.pack(args.folder, args.archive)}")


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m book_tools", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("export-onnx", help="write a translator as ONNX files (encoder, decoder, tokenizer)")
    p.add_argument("checkpoint", help="a run folder or its checkpoint.pt")
    p.add_argument("out", help="the folder to write")
    p.add_argument("--precision", default="fp16", choices=PRECISIONS, help="weights (default fp16)")
    p.set_defaults(run=cmd_export_onnx)
    p = sub.add_parser(
        "assign", help="build every assignment, or one given its folder: student notebook, solution, autograder (Otter)"
    )
    folder_help = "the assignments' folder, or one assignment's (default assignments)"
    p.add_argument("folder", nargs="?", default="assignments", help=folder_help)
    p.add_argument("--out", default="_build/assignments", help="where to write them (default _build/assignments)")
    p.add_argument("--run-tests", action="store_true", help="also run each solution against its tests (Otter)")
    p.add_argument("--release", help="pin the package for the semester: a release tag, vX.Y.Z (default: main)")
    p.set_defaults(run=cmd_assign)
    p = sub.add_parser(
        "grade",
        help="grade submissions with an assignment's autograder zip, into a CSV",
        description="Grade submissions with an assignment's autograder zip, into a CSV. Each submission's code "
        "runs in a sandbox apart from the tests; grade in a container or a virtual machine all the same "
        "(or on Gradescope, whose run script the zip replaces with this grader).",
    )
    p.add_argument("autograder", help="the assignment's autograder.zip (from the assign command)")
    p.add_argument("submissions", nargs="+", help="notebooks (.ipynb), zips, or folders of them")
    p.add_argument("--csv", help="write points per question and submission to this CSV file")
    p.add_argument("--timeout", type=int, default=900, help="seconds one submission may take to grade (default 900)")
    p.set_defaults(run=cmd_grade)
    p = sub.add_parser("sweep", help="train the runs of a sweep file side by side (--archive: then pack their records)")
    p.add_argument("file", help="the sweep file (YAML: common sections and runs)")
    p.add_argument("--out", required=True, help="folder for the sweep's run folders")
    p.add_argument("--jobs", type=int, default=8, help="runs trained at the same time (default 8)")
    p.add_argument("--threads", type=int, default=1, help="CPU threads per run (default 1; a CPU sweep: the cores)")
    p.add_argument("--archive", help="also pack the records into this .tar.gz (no checkpoints)")
    p.add_argument("--runs", nargs="+", metavar="NAME", help="train only these runs of the file (default: all)")
    p.add_argument("--device", default="auto", help="cpu, cuda, or auto (default)")
    p.set_defaults(run=cmd_sweep)
    p = sub.add_parser("pack", help="pack a sweep's records into a .tar.gz, without checkpoints")
    p.add_argument("folder")
    p.add_argument("archive")
    p.set_defaults(run=cmd_pack)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    utf8_console()
    args = parser().parse_args(argv)
    return run_command(args.run, args)
