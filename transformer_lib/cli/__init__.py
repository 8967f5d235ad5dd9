"""The command line: train, evaluate and translate, with the parts that lessons 9 and 10 build.

For example::

    python -m transformer_lib train --config multi30k_de_en_small      # a packaged config, or a path
    python -m transformer_lib evaluate --checkpoint runs/NAME/checkpoint.pt --split test_2016_flickr
    python -m transformer_lib translate --checkpoint runs/NAME < input.txt > output.txt
    python -m transformer_lib score runs/NAME/test_2016_flickr.hyp.txt --split test_2016_flickr --tgt en
    torchrun --standalone --nproc_per_node=4 -m transformer_lib train --config ...   # several GPUs

A training run writes one folder: the resolved config, the environment (versions, device, git
commit), the tokenizer, the metrics over time (``metrics.csv``), a log, the checkpoint, the final
scores (``scores.json``) and the hypotheses of each evaluated split. It needs only PyTorch, NumPy,
sentencepiece, sacrebleu, tqdm and PyYAML, and runs from a source checkout (``PYTHONPATH=.``).
This module holds the parser and ``main``; the commands' bodies are in
:mod:`~transformer_lib.cli.commands`, a run's config in :mod:`~transformer_lib.training.run_config`,
translating and scoring in :mod:`transformer_lib.translation`, the loop in :mod:`transformer_lib.training`.
The book's own tools (the assignments and their grading, the website's export, sweeps of many
runs) have a command line of their own, ``python -m book_tools``, in the repository's ``tools/`` folder.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from transformer_lib import __version__
from transformer_lib.cli.commands import cmd_evaluate, cmd_score, cmd_train, cmd_translate
from transformer_lib.config import DecodeConfig
from transformer_lib.data import LANGUAGES, SPLITS
from transformer_lib.errors import Interrupted, TransformerLibError, moved


def utf8_console() -> None:
    """Read and write UTF-8 on the standard streams, whatever the console's code page.

    On Windows, Python writes to a file or pipe in the locale's code page (cp1252, say): ``translate
    < input.txt > output.txt`` would read a UTF-8 file wrongly and fail on a character the code page
    lacks. Sentences and messages are UTF-8 everywhere here.
    """
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        if stream is not None and hasattr(stream, "reconfigure") and stream.encoding.lower().replace("-", "") != "utf8":
            stream.reconfigure(encoding="utf-8")


# The book's own tools (book_tools, in tools/ of the repository: not part of this package) took these.
TOOLS_COMMANDS = ("export-onnx", "assign", "grade", "sweep", "pack")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m transformer_lib``: parse the command line and run its command; returns the exit code."""
    utf8_console()
    parser = argparse.ArgumentParser(prog="python -m transformer_lib", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"transformer_lib {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="train a model from a YAML config")
    train.add_argument("--config", required=True, help="a YAML file, or the name of a packaged config")
    train.add_argument("--run-dir", help="output folder (default: runs/<config>-<time>)")
    train.add_argument("--resume", action="store_true", help="continue from the run folder's checkpoint")
    for name, helptext in (("evaluate", "BLEU on a Multi30k split"), ("translate", "translate stdin to stdout")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("--checkpoint", required=True, help="a run folder, or a checkpoint file in one")
        defaults = DecodeConfig()  # one source for the defaults: the config's
        p.add_argument("--beam", type=int, help=f"beam size, 1: greedy (default: the run's, else {defaults.beam_size})")
        p.add_argument("--alpha", type=float, help=f"length penalty (default: the run's, else {defaults.alpha})")
        p.add_argument("--batch-size", type=int, help=f"sentences decoded together (default {defaults.batch_size})")
        if name == "evaluate":
            p.add_argument("--split", default="test_2016_flickr", choices=list(SPLITS))
            p.add_argument("--limit", type=int, help="only the first N sentences")
            p.add_argument("--output", help="write the hypotheses to this file")
    p = sub.add_parser("score", help="BLEU of a file of translations against a Multi30k split")
    p.add_argument(
        "hypotheses", help="one translation a line, in the split's order; may be packed in a sweep's archive"
    )
    p.add_argument("--split", required=True, choices=list(SPLITS))
    p.add_argument("--tgt", required=True, choices=list(LANGUAGES), help="the language of the translations")
    p.add_argument("--moses", action="store_true", help="also the papers' Moses-tokenized BLEU (needs sacremoses)")
    for name in ("train", "evaluate", "translate"):
        p = sub.choices[name]
        p.add_argument("--device", default="auto", help="cpu, cuda, or auto (default)")
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in TOOLS_COMMANDS:
        return moved(f"book_tools {argv[0]}")
    args = parser.parse_args(argv)
    commands = {
        "train": cmd_train,
        "evaluate": cmd_evaluate,
        "translate": cmd_translate,
        "score": cmd_score,
    }
    return run_command(commands[args.command], args)


def run_command(command: Callable[[argparse.Namespace], None], args: argparse.Namespace) -> int:
    """Run one command: its exit code, and a bad input or an interruption as one line, never a traceback."""
    try:
        command(args)
    except Interrupted as exc:
        print(f"interrupted: {exc}", file=sys.stderr)
        return 130
    except (TransformerLibError, ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0
