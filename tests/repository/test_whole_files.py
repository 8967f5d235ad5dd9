"""Nothing half-written: the package and the tools write a file whole, through a temporary name and a rename.

A crash, a full disk or Ctrl-C in the middle of a write must leave the old file or none, never a
truncated one that a later run would read as good. ``transformer_lib.files`` does it
(:func:`atomic_path`, ``write_text``, ``write_bytes``). This test reads every function of
``transformer_lib/`` and ``tools/`` for a direct write (``Path.write_text``/``write_bytes``,
``open`` or ``Path.open`` for writing or appending, ``torch.save``/``np.save``, ``savefig``,
``to_csv``; other ways to write, such as a library's own save, are not seen): each must be
inside a ``with atomic_path(...)`` block, or be one of the few below, with the reason it is safe as
it is.
"""

import ast

from conftest import ROOT

FOLDERS = ("transformer_lib", "tools")
# (file, function): why a direct write there is not a file a reader could find half-written
DIRECT = {
    ("transformer_lib/checkpoint.py", "log"): "metrics.csv grows a line at a time (a resume cuts it back atomically)",
    ("transformer_lib/checkpoint.py", "note"): "log.txt grows a line at a time",
    ("tools/book_tools/sweep.py", "run_sweep"): "each run's log grows while it runs",
    ("tools/book_tools/coursework/channel.py", "answer"): "torch.save into an in-memory buffer",
    ("tools/book_tools/coursework/grader.py", "grade_submission"): "the grader's own temporary folder",
    ("tools/book_tools/coursework/grading.py", "pinned"): "a scratch copy of the assignments",
    ("tools/book_tools/coursework/grading.py", "_grade_in_process"): "a worker's temporary folder, read once it exits",
    ("tools/book_tools/coursework/sandbox.py", "_prepare_folder"): "the sandbox's temporary folder",
    ("tools/book_tools/coursework/variants.py", "grade_file"): "a temporary folder for one answer's grading",
}


MODULES_WITH_OPEN = ("tarfile", "gzip", "bz2", "lzma", "io", "zipfile", "codecs")  # open(name, mode)


def _mode(call: ast.Call) -> str:
    """The mode an ``open`` call asks for: ``open(name, mode)`` or a module's, ``path.open(mode)``; a
    mode that is not written out counts as a write."""
    function = call.func
    owner = getattr(function.value, "id", "") if isinstance(function, ast.Attribute) else ""
    position = 0 if isinstance(function, ast.Attribute) and owner not in MODULES_WITH_OPEN else 1
    given = [*call.args[position : position + 1], *(k.value for k in call.keywords if k.arg == "mode")]
    for arg in given:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return arg.value
        return "w"
    return "r"


def _writes(call: ast.Call) -> bool:
    """Whether a call writes a file: write_text/write_bytes, open for writing, a save, savefig, to_csv."""
    function = call.func
    name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
    owner = getattr(function.value, "id", "") if isinstance(function, ast.Attribute) else ""
    return (
        (name in ("write_text", "write_bytes") and isinstance(function, ast.Attribute))
        or (name == "open" and any(c in _mode(call) for c in "wxa"))
        or (name == "save" and owner in ("torch", "np", "numpy"))
        or name in ("savefig", "to_csv")
    )


def _name(call: ast.Call) -> str:
    """The called function's name: ``open`` for ``open(...)`` and ``path.open(...)`` alike."""
    return getattr(call.func, "id", getattr(call.func, "attr", ""))


def _in_atomic_block(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Inside a ``with atomic_path(...) as tmp:`` block."""
    while node in parents:
        node = parents[node]
        if isinstance(node, (ast.With, ast.AsyncWith)):
            calls = [item.context_expr for item in node.items if isinstance(item.context_expr, ast.Call)]
            if any(_name(call) == "atomic_path" for call in calls):
                return True
    return False


def direct_writes() -> dict[tuple[str, str], list[int]]:
    """(file, function) -> the lines of its writes outside a ``with atomic_path(...)`` block."""
    found: dict[tuple[str, str], list[int]] = {}
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
            for call in ast.walk(tree):
                if not isinstance(call, ast.Call) or not _writes(call) or _in_atomic_block(call, parents):
                    continue
                function = call
                while function in parents and not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    function = parents[function]
                name = getattr(function, "name", "<module>")
                found.setdefault((path.relative_to(ROOT).as_posix(), name), []).append(call.lineno)
    return found


def test_every_file_is_written_whole():
    unexplained = {key: lines for key, lines in direct_writes().items() if key not in DIRECT}
    assert not unexplained, (
        f"direct writes {unexplained}: write through transformer_lib.files (atomic_path, write_text, "
        "write_bytes), or add the function to DIRECT with the reason a half-written file cannot happen"
    )


def test_every_exception_is_still_there():
    """An entry of DIRECT whose write moved or went is removed, so the list stays the truth."""
    assert not set(DIRECT) - set(direct_writes())
