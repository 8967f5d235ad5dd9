"""The package's layout: the folders follow the book, and nothing a user imports moved.

Every name that ``from transformer_lib import X`` gave before the package was split into parts
(family, cli, coursework) still comes from there; every module says in its first line what it is
for; every command of ``python -m transformer_lib`` is still there, and those that moved to the
book's tools are there; the library never imports the tools.
"""

import ast
import importlib
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import transformer_lib
from conftest import TRACKER_NUMBERS

PACKAGE = Path(transformer_lib.__file__).parent
# ``transformer_lib.__all__`` when the package was one folder: what users imported then must keep working.
NAMES = [
    "AttentionCache",
    "BERT",
    "BOS_ID",
    "Batch",
    "ClassificationTask",
    "DataError",
    "Decoder",
    "DecoderLayer",
    "EOS_ID",
    "Encoder",
    "EncoderLayer",
    "FeedForward",
    "GPT",
    "Interrupted",
    "InvalidType",
    "InvalidValue",
    "KVCache",
    "LANGUAGES",
    "LabelledBatch",
    "LanguageModelTask",
    "LayerCache",
    "LearnedPositionalEncoding",
    "MaskedLMTask",
    "MissingFile",
    "MultiHeadAttention",
    "PAD_ID",
    "PRESETS",
    "SPECIAL_TOKENS",
    "SPLITS",
    "SequenceClassifier",
    "SinusoidalPositionalEncoding",
    "Task",
    "TaskConfig",
    "TokenEmbedding",
    "Tokenizer",
    "TrainConfig",
    "Trainer",
    "Transformer",
    "TransformerConfig",
    "TransformerLibError",
    "TranslationTask",
    "UNK_ID",
    "ViTConfig",
    "VisionTransformer",
    "accuracy",
    "alibi_bias",
    "alibi_slopes",
    "apply_rotary",
    "average_checkpoints",
    "beam_search",
    "causal_mask",
    "collate",
    "count_parameters",
    "encode_pairs",
    "example_size",
    "generate",
    "greedy_decode",
    "keep_attention_weights",
    "label_smoothed_cross_entropy",
    "load_checkpoint",
    "load_multi30k",
    "load_pairs",
    "mask_tokens",
    "moses_bleu",
    "noam_lr",
    "pad_ids",
    "padding_fraction",
    "padding_mask",
    "parameter_breakdown",
    "patchify",
    "pick_device",
    "sacrebleu_score",
    "sample",
    "scaled_dot_product_attention",
    "seed_everything",
    "setup",
    "sinusoidal_table",
    "sliding_window_mask",
    "tiled_attention",
    "token_batches",
    "tokenized_bleu",
]
COMMANDS = ["train", "evaluate", "translate", "score"]
TOOLS_COMMANDS = ["export-onnx", "assign", "grade", "sweep", "pack"]  # python -m book_tools


@pytest.mark.parametrize("name", NAMES)
def test_every_name_users_imported_is_still_at_the_top(name):
    assert name in transformer_lib.__all__ and getattr(transformer_lib, name) is not None


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_module_says_what_it_is_for(path):
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    assert docstring, f"{path.name} has no docstring"
    first = docstring.splitlines()[0]
    assert first.rstrip().endswith((".", ":")) and len(first) <= 120, f"{path.name}: {first!r}"


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_public_function_and_class_says_what_it_does(path):
    """The API page is built from docstrings (autodoc leaves out what has none): each public one has its own."""
    defined = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    public = [node for node in ast.parse(path.read_text(encoding="utf-8")).body if isinstance(node, defined)]
    bare = [node.name for node in public if not node.name.startswith("_") and not ast.get_docstring(node)]
    assert not bare, f"{path.name}: no docstring on {bare}"


REFERENCE = re.compile(r":(?:mod|func|class|meth|attr|exc):`~?([\w.]+)`")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def resolves(target: str, module) -> bool:
    """Whether a docstring's cross-reference names something: a module (``.name`` relative to the
    module's package), an attribute path from one, a name in the module, or a method of one of its classes."""
    if target.startswith("."):
        package = module.__name__ if module.__file__.endswith("__init__.py") else module.__name__.rpartition(".")[0]
        target = package + target
    parts = target.split(".")
    for cut in range(len(parts), 0, -1):  # the longest importable prefix, then attributes
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            found = getattr(found, name, None)
        if found is not None:
            return True
    found = module
    for name in parts:
        found = getattr(found, name, None)
    classes = [c for _, c in inspect.getmembers(module, inspect.isclass) if c.__module__ == module.__name__]
    return found is not None or any(hasattr(c, target) for c in classes)


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__main__.py")  # importing __main__ runs the CLI


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_cross_reference_in_a_docstring_names_something_that_exists(path):
    """``:mod:`.grading``` after the module moved away is a sentence about nothing: each reference resolves."""
    module = importlib.import_module(module_name(path))
    targets = REFERENCE.findall(path.read_text(encoding="utf-8"))
    missing = [t for t in targets if not resolves(t, module)]
    assert not missing, f"{path.relative_to(PACKAGE)} names what does not exist: {missing}"


def test_the_reference_check_finds_a_module_that_moved():
    import transformer_lib.coursework as coursework

    assert resolves(".quiz", coursework) and resolves("transformer_lib.checkpoint.Checkpoint.of", coursework)
    assert not resolves(".grading", coursework) and not resolves("transformer_lib.training.run_folder", coursework)


def test_the_parts_are_folders_and_the_package_docstring_maps_them():
    parts = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert parts == {"training", "family", "cli", "coursework", "benchmarks"}
    assert all(f"``{part}/``" in transformer_lib.__doc__ for part in parts)


def test_the_top_folder_stays_small_enough_to_read():
    """At most 20 modules beside the parts: a reader sees the Transformer's concepts at a glance."""
    modules = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(modules) <= 20, modules


def test_no_class_is_longer_than_200_lines():
    """A class a reader can hold in mind; what grows past that is another part, composed."""
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                assert node.end_lineno - start + 1 <= 200, f"{path.relative_to(PACKAGE)}: {node.name}"


def test_every_command_is_still_there():
    out = subprocess.run([sys.executable, "-m", "transformer_lib", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and all(command in out.stdout for command in COMMANDS)
    tools = subprocess.run([sys.executable, "-m", "book_tools", "--help"], capture_output=True, text=True)
    assert tools.returncode == 0 and all(command in tools.stdout for command in TOOLS_COMMANDS)


MOVED = [["transformer_lib", name] for name in TOOLS_COMMANDS] + [
    ["transformer_lib.records"],
    ["transformer_lib.benchmarks.kv_cache"],
    ["transformer_lib.benchmarks.beam_settings"],
]


@pytest.mark.parametrize("command", MOVED, ids=lambda c: " ".join(c))
def test_a_command_that_moved_to_the_tools_says_where_in_one_line(command):
    out = subprocess.run([sys.executable, "-m", *command, "x"], capture_output=True, text=True)
    now = f"book_tools {command[1]}" if len(command) == 2 else command[0].replace("transformer_lib", "book_tools")
    assert out.returncode == 2 and out.stderr.splitlines() == [
        f"error: this is the book's tools' command now: python -m {now} ... "
        "(in a checkout of the book; pip install -e ./tools first, or PYTHONPATH=tools)"
    ]
    assert subprocess.run([sys.executable, "-m", *now.split(), "--help"], capture_output=True).returncode == 0


def test_the_library_never_imports_the_tools():
    """book_tools (tools/) builds on the library; a learner's install of the library has no tools to import."""
    for path in PACKAGE.rglob("*.py"):
        tools = {m for m in imported_modules(path) if m == "book_tools" or m.startswith("book_tools.")}
        assert not tools, f"{path.relative_to(PACKAGE)} imports {sorted(tools)}"


PARTS = sorted(
    ".".join(p.relative_to(PACKAGE).with_suffix("").parts).removesuffix(".__init__")
    for part in ("training", "family", "cli", "coursework")
    for p in (PACKAGE / part).glob("*.py")
)


# Imports each module first, as a fresh interpreter would: every transformer_lib module is forgotten
# before the next (PyTorch and the rest stay loaded, which is what makes one process enough).
IMPORT_EACH = """
import importlib, json, sys
failed = {}
for module in sys.argv[1:]:
    for name in [n for n in sys.modules if n == "transformer_lib" or n.startswith("transformer_lib.")]:
        del sys.modules[name]
    try:
        importlib.import_module(f"transformer_lib.{module}")
    except Exception as error:
        failed[module] = f"{type(error).__name__}: {error}"
print(json.dumps(failed))
"""


def test_each_part_imports_on_its_own():
    """Each module of the parts imported first, before anything else of the package: no import cycle."""
    out = subprocess.run([sys.executable, "-c", IMPORT_EACH, *PARTS], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr.strip().splitlines()[-1]
    assert json.loads(out.stdout) == {}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    return found | {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}


def test_the_configs_are_the_bottom_floor():
    """A checkpoint, a run config or a command reads a config without importing the model, decoding or training."""
    ours = {m for m in imported_modules(PACKAGE / "config.py") if m.startswith("transformer_lib")}
    assert ours == {"transformer_lib.errors"}


def test_each_name_a_config_may_take_has_its_implementation():
    """The names the configs check (config.py) are the keys of the tables that build them."""
    from transformer_lib import config
    from transformer_lib.embeddings import POSITIONAL_ENCODINGS
    from transformer_lib.layers import FUNCTIONS
    from transformer_lib.training.schedules import learning_rate

    assert tuple(POSITIONAL_ENCODINGS) == config.POSITIONALS and tuple(FUNCTIONS) == config.ACTIVATIONS
    for schedule in config.SCHEDULES:  # each one the config accepts gives a rate
        train = config.TrainConfig(schedule=schedule, max_minutes=10.0)
        assert learning_rate(train, 100, 60.0, 64) > 0


@pytest.mark.parametrize("part", ["training", "benchmarks", "coursework", "family"])
def test_no_import_climbs_back_up_to_the_command_line(part):
    """The command line builds on the rest; loading and translating with a run are the core's."""
    for path in (PACKAGE / part).rglob("*.py"):
        climbing = {
            m for m in imported_modules(path) if m == "transformer_lib.cli" or m.startswith("transformer_lib.cli.")
        }
        assert not climbing, f"{path.relative_to(PACKAGE)} imports {sorted(climbing)}"


def test_the_benchmarks_have_one_home():
    """Scripts that measure live in benchmarks/; experiments/ keeps the notes and the sweeps' YAML files."""
    experiments = PACKAGE.parent / "experiments"
    scripts = sorted(str(p.relative_to(experiments)) for p in experiments.rglob("*.py"))
    assert not scripts, f"move {scripts} into tools/book_tools/benchmarks/"
    assert (experiments / "NOTES.md").is_file()


def test_ci_code_never_imports_test_code():
    """The CI's scripts import the package; the tests may import the CI's helpers, never the reverse."""
    tests = {p.stem for p in (PACKAGE.parent / "tests").glob("*.py")}
    for path in sorted((PACKAGE.parent / ".ci").glob("*.py")):
        found = {m.split(".")[0] for m in imported_modules(path)} & tests
        assert not found, f"{path.name} imports {sorted(found)}"
        lines = path.read_text(encoding="utf-8").splitlines()
        reaching = [line for line in lines if "sys.path" in line and "tests" in line]
        assert not reaching, f"{path.name} puts tests/ on the import path: {reaching}"


def test_comments_say_why_never_which_issue():
    """The git log holds the history: the code, its configs, the tests and CI's scripts name no issue."""
    root = PACKAGE.parent
    tracker = re.compile(TRACKER_NUMBERS, re.IGNORECASE)
    files = [*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.yaml"), *root.glob("tests/*.py"), *root.glob(".ci/*")]
    found = [
        f"{path.relative_to(root)}:{number}: {line.strip()}"
        for path in files
        if path.is_file()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if tracker.search(line)
    ]
    assert not found, "\n".join(found)
