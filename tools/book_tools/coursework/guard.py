"""Refuse to auto-grade a submission that changes the libraries its tests rely on.

The hidden tests run in the same Python process as the submission, after it: a notebook that
writes ``torch.allclose = lambda *a, **k: True`` would pass every comparison. :func:`tampering`
reads each code cell (never running it) for an assignment to, or deletion of, an attribute of a
module the tests use (``torch``, ``math``, ``numpy``, ``builtins``, ``transformer_lib``, ``book_tools``, ``otter``,
``sacrebleu``, and ``pickle``, which carries Otter's results out of the process), or of anything
imported from one, directly or through ``setattr``/``delattr``.
Settings are allowed: ``torch.backends`` (``torch.backends.cudnn.deterministic = True``) and
``torch.compile``'s configurations.

:class:`LibraryGuard`, an Otter plugin, runs it on each submission before it is executed and,
when something is found, fails every auto-graded question with one line naming the cell: the
instructor reads that notebook by hand. A reading of the source cannot see what code builds at
run time (``exec``), so this stops the plain attempt, not a determined one.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Any

from book_tools.coursework.checks import BY_HAND
from book_tools.coursework.grading import plugin_base

WATCHED = ("torch", "math", "numpy", "builtins", "transformer_lib", "book_tools", "otter", "sacrebleu", "pickle")
ALLOWED = ("torch.backends", "torch._dynamo.config", "torch._inductor.config")  # switches a learner may set
ALWAYS = {"__builtins__": "builtins"}  # names bound without an import


def _watched(module: str) -> bool:
    return module.split(".")[0] in WATCHED and not module.startswith(ALLOWED)


def _python(source: str) -> str:
    """A cell's source as plain Python (IPython's ``!command`` and ``%magic`` lines turned into calls)."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:
        return source
    return TransformerManager().transform_cell(source)


def _parsed(cells: Any) -> list[ast.Module]:
    """Each code cell as a tree (one that does not parse, as an empty one: it fails when run)."""
    trees = []
    for source in cells:
        try:
            trees.append(ast.parse(_python(source)))
        except (SyntaxError, ValueError, RecursionError, MemoryError):  # nested too deep, a null byte
            trees.append(ast.Module(body=[], type_ignores=[]))
    return trees


def _import_bindings(node: ast.AST) -> list[tuple[str, str]]:
    """(name, dotted origin) for each name an import statement binds (``*`` for ``from m import *``:
    origin ``m``); none for any other node or a relative import."""
    if isinstance(node, ast.Import):  # import torch.nn.functional as F: F is torch.nn.functional;
        return [  # import torch.nn: torch is torch
            (alias.asname, alias.name) if alias.asname else (alias.name.split(".")[0],) * 2 for alias in node.names
        ]
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
        return [
            ("*", node.module) if alias.name == "*" else (alias.asname or alias.name, f"{node.module}.{alias.name}")
            for alias in node.names
        ]
    return []


def _imported(tree: ast.AST) -> dict[str, str]:
    """Every name an import binds to a watched module or to something of one: {name: dotted origin}."""
    names = dict(ALWAYS)
    for node in ast.walk(tree):
        names.update((name, origin) for name, origin in _import_bindings(node) if name != "*")
    return {name: origin for name, origin in names.items() if _watched(origin)}


def _dotted(node: ast.AST, names: dict[str, str]) -> str | None:
    """``torch.nn.functional.softmax`` for an attribute chain rooted at a watched name, else None."""
    parts = []
    while True:
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            if isinstance(node, ast.Attribute):
                parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "vars" and node.args:
            parts.append("__dict__")  # vars(torch)["allclose"] = ... is torch.__dict__["allclose"] = ...
            node = node.args[0]
        else:
            break
    if not isinstance(node, ast.Name) or node.id not in names:
        return None
    dotted = ".".join([names[node.id], *reversed(parts)])
    return dotted if _watched(dotted) else None


def _changes(tree: ast.AST, names: dict[str, str]) -> list[tuple[int, str]]:
    """(line, what) for each assignment, deletion, setattr or delattr that reaches into a watched module."""
    found = []
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr"):
            if node.args and (what := _dotted(node.args[0], names)):
                attr = node.args[1] if len(node.args) > 1 else None
                found.append((node.lineno, f"{what}.{attr.value if isinstance(attr, ast.Constant) else '?'}"))
            continue
        while targets:  # a, torch.x = ... and (torch.x, y) = ... alike; x[torch.arange(3)] = 0 is not a change
            target = targets.pop()
            if isinstance(target, (ast.Tuple, ast.List)):
                targets += target.elts
            elif isinstance(target, ast.Starred):
                targets.append(target.value)
            elif isinstance(target, (ast.Attribute, ast.Subscript)) and (what := _dotted(target, names)):
                found.append((node.lineno, what))
    return sorted(set(found))


def tampering(cells: list[str]) -> str | None:
    """One line naming the first change to a watched library in the code cells, or None."""
    found = changes(cells)
    return f"Wrong: {found[0]}, which the tests rely on: {BY_HAND}" if found else None


def changes(cells: Any) -> list[str]:
    """``code cell N, line L changes X`` for each change to a watched library the code cells make."""
    trees = _parsed(cells)
    names: dict[str, str] = {}
    for tree in trees:  # a notebook's imports hold in every later cell (and, run out of order, earlier)
        names.update(_imported(tree))
    return [
        f"code cell {number}, line {line} changes {what}"
        for number, tree in enumerate(trees, start=1)
        for line, what in _changes(tree, names)
    ]


NOTEBOOK = "<notebook>."  # what a name the notebook's own class statements bind is read as
LONGEST = 12  # attributes read from a name: no package's path is longer (x = x.view(3) would grow forever)


def ancestors(cells: Any, name: str) -> set[str]:
    """The dotted names of what the notebook's ``name`` is or derives from, read from its cells' text.

    Every binding counts, in any cell: an import (``from transformer_lib import MultiHeadAttention as
    M``, or ``*``), an assignment (``Base = tl.MultiHeadAttention``, ``Base, = (tl.MultiHeadAttention,)``,
    ``M := ...``), a ``for`` or ``with`` target, a class statement's bases and decorators, ``X.__bases__ =``,
    ``type(name, bases, namespace)``, followed through the notebook's own classes, and what their bodies
    keep (attributes, methods' defaults); what a call is made on and with counts as what it gives
    (``functools.partial(Base, ...)``).
    Only names bound once are followed: a name bound by several statements (the student's own
    ``MultiHeadAttention`` beside an import of the package's, a function's parameter) could be any
    of them, and is left to the run. The grader reads this from the notebook it holds, so code that
    runs in the submission's process cannot change it; a class built from names computed at run time
    is not seen.
    """
    imported: dict[str, set[str]] = {}
    assigned: dict[str, list[ast.expr]] = {}
    bases: dict[str, list[ast.expr]] = {}
    starred: set[str] = set()  # modules imported with *: any name may be theirs
    taken: dict[str, list[ast.expr]] = {}  # what a class's body keeps from elsewhere: attributes, defaults
    bound: dict[str, int] = {}  # how many statements bind each name: one binding is read, several are not

    def bind(target: ast.expr, value: ast.expr) -> None:
        """Record that ``target`` (a name, or names unpacked) is given ``value``, or a part of it."""
        pairs = [(target, value)]
        while pairs:
            target, value = pairs.pop()
            if isinstance(target, ast.Starred):
                pairs.append((target.value, value))
            elif isinstance(target, (ast.Tuple, ast.List)):
                same = isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts)
                pairs += zip(target.elts, value.elts, strict=True) if same else [(t, value) for t in target.elts]
            elif isinstance(target, ast.Attribute) and target.attr == "__bases__":  # X.__bases__ = (B,), later
                if isinstance(target.value, ast.Name):
                    bases.setdefault(target.value.id, []).append(value)
            elif isinstance(target, ast.Name):
                bound[target.id] = bound.get(target.id, 0) + 1
                called = value.func if isinstance(value, ast.Call) else None
                if isinstance(called, ast.Name) and called.id == "type" and len(value.args) > 1:
                    bases.setdefault(target.id, []).append(value.args[1])  # X = type("X", (B,), {})
                else:
                    assigned.setdefault(target.id, []).append(value)

    for tree in _parsed(cells):
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for binding, origin in _import_bindings(node):
                    if binding == "*":
                        starred.add(origin)
                    else:
                        imported.setdefault(binding, set()).add(origin)
                        bound[binding] = bound.get(binding, 0) + 1
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for argument in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
                    bound[argument.arg] = bound.get(argument.arg, 0) + 2  # a parameter: any value at all
            elif isinstance(node, ast.ClassDef):
                bound[node.name] = bound.get(node.name, 0) + 1
                bases.setdefault(node.name, []).extend(node.bases)
                assigned.setdefault(node.name, []).extend(node.decorator_list)  # a decorator may replace it
                taken.setdefault(node.name, []).extend(_taken(node))
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    bind(target, node.value)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                bind(node.target, node.iter)  # for M in (A, B): M may be either
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                bind(node.optional_vars, node.context_expr)

    def meanings(expression: ast.expr) -> set[str]:
        """What an expression may name: dotted names, or NOTEBOOK + a class of the notebook's. Followed with a
        stack, not recursion, so that no chain of names or attributes is too long to read."""
        found: set[str] = set()
        stack, visited = [(expression, "")], set()
        while stack:
            node, suffix = stack.pop()  # suffix: the attributes read from it, ".attention.MultiHeadAttention"
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):  # (B,), a part of one, any of them
                stack += [(element, suffix) for element in node.elts]
                continue
            if isinstance(node, (ast.Starred, ast.Subscript, ast.NamedExpr)):  # *B, B[0], (x := B)
                stack.append((node.value, suffix))
                continue
            if isinstance(node, ast.Lambda):  # lambda c: B (a decorator that replaces the class)
                stack.append((node.body, suffix))
                continue
            if isinstance(node, ast.Call):  # partial(B, ...), f(B): what it is called on may be what it gives
                parts = [node.func, *node.args, *(keyword.value for keyword in node.keywords)]
                stack += [(part, suffix) for part in parts]
                continue
            attributes = []
            while isinstance(node, ast.Attribute):
                attributes.append(node.attr)
                node = node.value
            suffix = "".join(f".{attribute}" for attribute in reversed(attributes)) + suffix
            if not isinstance(node, ast.Name) or (node.id, suffix) in visited or suffix.count(".") > LONGEST:
                continue
            if bound.get(node.id, 0) > 1:  # bound by several statements: which one holds is the run's to say
                continue
            visited.add((node.id, suffix))
            found |= {origin + suffix for origin in imported.get(node.id, ())}
            if node.id in bases:
                found.add(NOTEBOOK + node.id + suffix)
            stack += [(value, suffix) for value in assigned.get(node.id, [])]
            if node.id not in imported and node.id not in bases and node.id not in assigned:
                found |= {node.id + suffix} | {f"{module}.{node.id}{suffix}" for module in starred}
        return found

    found: set[str] = set()
    todo = list(meanings(ast.Name(id=name)))
    while todo:
        meaning = todo.pop()
        if meaning in found:
            continue
        found.add(meaning)
        if meaning.startswith(NOTEBOOK):
            for base in bases.get(meaning[len(NOTEBOOK) :], []) + taken.get(meaning[len(NOTEBOOK) :], []):
                todo += meanings(base)
    return {meaning for meaning in found if not meaning.startswith(NOTEBOOK)}


def _taken(cls: ast.ClassDef) -> list[ast.expr]:
    """What a class statement's body keeps from elsewhere when it runs: its attributes' values
    (``forward = MultiHeadAttention.forward``) and its methods' default arguments."""
    found: list[ast.expr] = []
    for statement in cls.body:
        if isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is not None:
            found.append(statement.value)
        elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found += [*statement.args.defaults, *(d for d in statement.args.kw_defaults if d is not None)]
    return found


class LibraryGuard(plugin_base()):
    """Otter plugin: every auto-graded question fails, with the reason, when :func:`tampering` finds a change.

    List it before :class:`.grading.CellTimeLimit` in a master's plugins, so that the cell numbers
    it names are the student's own (that plugin inserts a cell of its own at the top).
    """

    finding: str | None = None

    def before_execution(self, submission):
        self.finding = tampering([cell.source for cell in submission.cells if cell.cell_type == "code"])
        return submission

    def after_grading(self, results):
        if self.finding is None:
            return
        for test_file in results.results.values():
            test_file.test_case_results = [
                dataclasses.replace(result, message=self.finding, passed=False)
                for result in test_file.test_case_results
            ]
        results.set_output(self.finding)
