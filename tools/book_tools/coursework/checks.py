"""The checks only grading needs: the hidden tests import them where a submission is graded.

A hidden test draws random cases over a question's whole domain (:class:`Draws`), makes the
package's own components unavailable while the learner's code runs (:func:`without`), puts correct
versions in place of a learner's earlier answers (:func:`standing_in`), follows a gradient through
the learner's code (:func:`gradient`), and scores the capstone's handed-in translations
(:func:`translation_bleu`). Where the submission's code runs in a process of its own
(:mod:`book_tools.coursework.sandbox`), each acts there through its answers' handles. What the
learners' own tests use too (:func:`~transformer_lib.coursework.checks.call`, ``Wrong``, ...) is the
library's :mod:`transformer_lib.coursework.checks`.
"""

from __future__ import annotations

import functools
import importlib
import re
import sys
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from book_tools.coursework.channel import RemoteError, Stopped
from transformer_lib.coursework.checks import CALL_SECONDS, RemoteAnswer, Wrong, call, defined, handed_in_lines, raised


def _remote(answer: Any) -> bool:
    """Whether ``answer`` lives in a submission's process (a handle), not in this one."""
    return isinstance(answer, RemoteAnswer)


def remote_call(
    function: Any, args: tuple, kwargs: dict, name: str, seconds: float, request: str = "call", extra: tuple = ()
) -> Any:
    """A request to the submission's process, under a limit kept from outside; failures as Wrong."""
    if not function._callable and request == "call":
        raise Wrong(f"{name} should be a function, got {function._type}")
    try:
        return function._sandbox.ask(
            (request, function, args, kwargs, *extra), root=function._root, handle=function, seconds=seconds
        )
    except Stopped as stopped:
        if str(stopped).startswith(("stopped after", "was stopped earlier")):
            raise Wrong(f"{name} {stopped}") from None
        raise Wrong(f"{name} could not be graded: {stopped}") from None
    except RemoteError as error:
        if error.kind == "Wrong":
            raise Wrong(error.message) from None
        raise raised(name, error.kind, error.message) from None


class Draws:
    """Random cases over a question's whole domain, from a generator of their own.

    A hidden test that checks a few hand-picked inputs passes a wrong answer whose mistake those
    inputs happen not to show. Drawing sizes, shapes and values at random, many times, reaches the
    cases no one listed; the seed is fixed, so every grading of a submission gives the same grade.
    """

    def __init__(self, seed: int) -> None:
        self.generator = torch.Generator().manual_seed(seed)

    def integer(self, low: int, high: int) -> int:
        """A whole number from ``low`` to ``high``, both included."""
        return int(torch.randint(low, high + 1, (), generator=self.generator))

    def chance(self, p: float) -> bool:
        """True with probability ``p``."""
        return bool(torch.rand((), generator=self.generator) < p)

    def normal(self, *shape: int, scale: float = 1.0) -> Tensor:
        return torch.randn(*shape, generator=self.generator) * scale

    def choice(self, options: list) -> Any:
        return options[self.integer(0, len(options) - 1)]

    def broadcasting(self, shape: list[int]) -> list[int]:
        """A shape that broadcasts to ``shape``: each dimension its own size or 1, some leading ones dropped."""
        drawn = [size if self.chance(0.5) else 1 for size in shape]
        return drawn[self.integer(0, len(shape) - 1) :]


def unavailable(what: str) -> Callable[..., Any]:
    """A stand-in that fails with the line saying the question asks for one's own version."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise Wrong(f"your answer calls {what}: this question asks you to write it yourself")

    return refuse


@contextmanager
def without(components: dict[str, Any], namespaces: tuple[dict, ...] = ()) -> Iterator[None]:
    """Run the block with each component (``{"transformer_lib.X": X}``) replaced everywhere it is reachable.

    Replaced: every attribute of a loaded ``transformer_lib``, ``torch`` or ``sacrebleu`` module that is
    the component, every entry that is of a dict held by a module of the component's own package
    (sacrebleu's ``METRICS["BLEU"]``), and every name in ``namespaces`` (a learner's globals, where
    ``from ... import`` put its own references) bound to it. Everything is put back afterwards. Each
    name must name its component (ValueError otherwise): where the submission runs apart, the
    component is found by its name.
    """
    for name, obj in components.items():
        try:
            named = resolve(name)
        except (ImportError, AttributeError):
            named = None
        if named is not obj:
            raise ValueError(f"without: {name!r} does not name the component given with it")
    if isinstance(namespaces, RemoteNamespaces):  # replaced in the submission's process, not here
        with _remote_context(namespaces, "without", list(components)):
            yield
        return
    targets = {id(obj): (name, unavailable(name)) for name, obj in components.items()}
    replaced: list[tuple[Any, str, Any]] = []
    packages = {name.split(".")[0] for name in components}  # where a dict of them is looked into
    modules = [m for n, m in list(sys.modules.items()) if n.split(".")[0] in ("transformer_lib", "torch", "sacrebleu")]
    try:
        for module in modules:
            for attr, value in list(vars(module).items()):
                if id(value) in targets:
                    replaced.append((module, attr, value))
                    setattr(module, attr, targets[id(value)][1])
                elif type(value) is dict and module.__name__.split(".")[0] in packages:  # type(): reads nothing lazy
                    for key, entry in list(value.items()):
                        if id(entry) in targets:
                            replaced.append((value, key, entry))
                            value[key] = targets[id(entry)][1]
        for namespace in namespaces:
            for attr, value in list(namespace.items()):
                if id(value) in targets:
                    replaced.append((namespace, attr, value))
                    namespace[attr] = targets[id(value)][1]
        yield
    finally:
        for place, attr, value in reversed(replaced):
            if isinstance(place, dict):
                place[attr] = value
            else:
                setattr(place, attr, value)


class RemoteNamespaces(tuple):
    """The namespaces of answers in a submission's process: :func:`without` and :func:`standing_in` act there."""


def globals_of(*answers: Any) -> tuple[dict, ...]:
    """The global namespaces the learner's functions and classes see (for :func:`without`)."""
    if any(_remote(answer) for answer in answers):
        return RemoteNamespaces(answer for answer in answers if _remote(answer))
    found: dict[int, dict] = {}
    for answer in answers:
        functions = [answer] if callable(answer) and hasattr(answer, "__globals__") else []
        if isinstance(answer, type):
            functions = [v for v in vars(answer).values() if hasattr(v, "__globals__")]
        elif not functions and hasattr(type(answer), "__mro__"):
            functions = [v for v in vars(type(answer)).values() if hasattr(v, "__globals__")]
        for function in functions:
            found[id(function.__globals__)] = function.__globals__
    return tuple(found.values())


@contextmanager
def standing_in(namespaces: tuple[dict, ...], **names: Any) -> Iterator[None]:
    """Run the block with correct versions in place of a learner's earlier answers (``attention=...``).

    A question that builds on an earlier one is graded on its own: a mistake costs its question's
    points only. The learner's names are put back afterwards.
    """
    if isinstance(namespaces, RemoteNamespaces):  # the correct versions are called back from there
        with _remote_context(namespaces, "standing_in", names):
            yield
        return
    saved = [(namespace, name, namespace.get(name, _MISSING)) for namespace in namespaces for name in names]
    try:
        for namespace in namespaces:
            namespace.update(names)
        yield
    finally:
        for namespace, name, value in saved:
            if value is _MISSING:
                namespace.pop(name, None)
            else:
                namespace[name] = value


_MISSING = object()


@contextmanager
def _remote_context(owners: RemoteNamespaces, request: str, what: Any) -> Iterator[None]:
    box = owners[0]._sandbox
    try:
        token = box.ask((request, list(owners), what), seconds=CALL_SECONDS)
    except (Stopped, RemoteError) as error:
        raise Wrong(f"the answer could not be graded: {error}") from None
    try:
        yield
    finally:
        if owners[0]._generation == box.generation:  # a process stopped since has nothing to put back
            with suppress_remote():
                box.ask(("restore", token), seconds=CALL_SECONDS)


@contextmanager
def suppress_remote() -> Iterator[None]:
    try:
        yield
    except (Stopped, RemoteError):
        pass


def placed(answer: Any, *objects: Any) -> Any:
    """``objects`` where ``answer`` runs: themselves, or copies in the submission's process, as handles.

    For what an answer changes and the test then reads (a model and its optimizer that a training step
    updates): a copy sent with each call would come back unchanged. They are sent together, so that
    what they share (the model's parameters, which the optimizer holds) stays shared. One object is
    returned alone.
    """
    if _remote(answer):
        objects = tuple(remote_call(answer, objects, {}, "keeping the test's objects", CALL_SECONDS, "keep"))
    return objects[0] if len(objects) == 1 else objects


def gradient(function: Any, *args: Any, name: str, wrt: int = 0, **kwargs: Any) -> tuple[Any, Any]:
    """``(function(*args, **kwargs), the gradient of its sum with respect to args[wrt])``: where the answer
    runs, so that a gradient is followed through the learner's own code. The gradient is None when
    none reaches ``args[wrt]``."""
    function = defined(function, name)
    if _remote(function):
        return remote_call(function, args, kwargs, name, CALL_SECONDS, "gradient", (wrt,))
    args = list(args)
    args[wrt] = args[wrt].detach().clone().requires_grad_()
    out = call(function, *args, name=name, **kwargs)
    first = out[0] if isinstance(out, tuple) and out else out
    if isinstance(first, Tensor) and first.requires_grad:
        first.sum().backward()
    return out, args[wrt].grad


def inherits(answer: Any, dotted: str) -> bool:
    """Whether ``answer`` is, derives from, or is an instance of the class ``dotted`` names
    (``transformer_lib.MultiHeadAttention``): ask it of a learner's class, and of what the class builds.

    For an answer in a submission's process, the grader first reads the notebook it holds
    (:func:`book_tools.coursework.guard.ancestors`): a class statement, an import, an assignment or a
    call that names the class on the way to the answer's name says so, whatever the process does. Then
    that process is asked, with the class as it was before the notebook ran; a process that cannot
    answer loses the question. That answer is its word, which code reaching the grading's objects in
    its own memory can change (book/instructors.md says so)."""
    target = resolve(dotted)
    if _remote(answer):
        from book_tools.coursework.guard import ancestors  # guard imports this module

        cells = (source for _, source in answer._sandbox.cells)
        if answer._root and any(_names(name, target) for name in ancestors(cells, answer._root)):
            return True
        try:
            return answer._sandbox.ask(("subclass", answer, dotted), root=answer._root, handle=answer) is True
        except (Stopped, RemoteError) as error:
            raise Wrong(f"whether the answer is built on {dotted} could not be asked: {error}") from None
    return built_on(answer, target)


def built_on(obj: Any, target: type) -> bool:
    """Whether ``obj`` is, derives from, or is an instance of ``target``, or its class holds functions
    of ``target``'s (``forward = MultiHeadAttention.forward``): asked where the answer runs."""
    if isinstance(obj, target) or (isinstance(obj, type) and issubclass(obj, target)):
        return True
    cls = obj if isinstance(obj, type) else type(obj)
    prefix = f"{target.__qualname__}."
    return any(
        getattr(value, "__module__", None) == target.__module__
        and str(getattr(value, "__qualname__", "")).startswith(prefix)
        for klass in getattr(cls, "__mro__", (cls,))
        for value in vars(klass).values()
    )


def _names(dotted: str, target: Any) -> bool:
    """Whether ``dotted`` (a name read from a notebook) is ``target`` or something of it
    (``transformer_lib.MultiHeadAttention.forward``), looked up only in ``target``'s own package."""
    parts = dotted.split(".")
    if parts[0] != target.__module__.split(".")[0]:
        return False
    for end in range(len(parts), 1, -1):  # nothing is imported for a name a notebook wrote: importing
        try:  # runs a module (transformer_lib.__main__ runs the command line)
            if resolve(".".join(parts[:end]), imports=False) is target:
                return True
        except (ImportError, AttributeError):
            continue
    return False


def resolve(dotted: str, imports: bool = True) -> Any:
    """The object a dotted name names (``torch.nn.functional.softmax``): its longest importable prefix, then
    attributes; with ``imports=False``, among the modules already loaded only. ImportError or
    AttributeError when it names nothing."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        name = ".".join(parts[:cut])
        try:
            obj = importlib.import_module(name) if imports else sys.modules[name]
        except (ImportError, KeyError):
            continue
        for part in parts[cut:]:
            obj = getattr(obj, part)
        return obj
    raise ImportError(dotted)


REFERENCE_SHARE = 0.25  # share of lines that copy their reference beyond which a file is not graded
NEAR_COPY = (3, 0.05)  # a line within 3 character edits of its reference, or 5 % of its characters, copies it
BLEU_CEILING = 60.0  # far above any system trained on Multi30k alone (the best are in the low 40s)
BY_HAND = "not graded automatically (your instructor grades it by hand)"  # the end of every refusal


def normalised(line: str) -> str:
    """A line as the reference check compares it: Unicode NFKC, case folded, punctuation and spacing
    dropped (so that tokenised, detokenised, doubled-space or full-width copies read the same)."""
    folded = unicodedata.normalize("NFKC", line).casefold()
    return " ".join(re.sub(r"[\W_]+", " ", folded).split())


def edits_within(a: str, b: str, cap: int) -> bool:
    """Whether the character edit distance of ``a`` and ``b`` is at most ``cap`` (stops early past it)."""
    if abs(len(a) - len(b)) > cap:
        return False
    previous = list(range(len(b) + 1))
    for i, char in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, other in enumerate(b, 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char != other))
        if min(current) > cap:
            return False
        previous = current
    return previous[-1] <= cap


def keeps_every_word(line: str, reference: str) -> bool:
    """Whether every word of ``reference`` is in ``line``, in order (words put between them disguise a copy)."""
    words = iter(line.split())
    return all(word in words for word in reference.split())


def copies(hypotheses: list[str], references: list[str]) -> int:
    """How many lines copy their reference: once :func:`normalised`, within ``NEAR_COPY`` character
    edits of it (3, or 5 % of its characters where that is more: a word swapped, a letter changed),
    or holding every one of its words in order, whatever words were put between them. Lesson 11's
    trained models' translations: 9 to 13 % of lines, against the quarter that refuses."""
    floor, share = NEAR_COPY
    found = 0
    for hypothesis, reference in zip(hypotheses, references, strict=True):
        a, b = normalised(hypothesis), normalised(reference)
        near = edits_within(a, b, max(floor, int(share * max(len(a), len(b)))))
        found += a == b or near or keeps_every_word(a, b)
    return found


@functools.cache
def _bleu_of(text: str, split: str, lang: str) -> tuple[float, int, int]:
    """(BLEU, lines that copy their reference, lines) of a translations file's text."""
    from transformer_lib.data import load_multi30k
    from transformer_lib.metrics import sacrebleu_score

    hypotheses = text.splitlines()
    references = load_multi30k(split, lang)
    if len(hypotheses) != len(references):
        raise Wrong(f"the file has {len(hypotheses)} lines; {split} has {len(references)} sentences, one a line")
    return sacrebleu_score(hypotheses, references), copies(hypotheses, references), len(references)


def translation_bleu(path: Any, split: str, lang: str) -> float:
    """Cased sacreBLEU of a file of translations (one a line) against a Multi30k split, as lesson 11 scores.

    Computed once per content: a capstone's tests ask for it many times. A file whose lines copy the
    references (they ship with the dataset) beyond ``REFERENCE_SHARE``, however disguised
    (:func:`copies`), or that scores beyond any model trained on Multi30k, is not graded: Wrong says
    why, for the instructor to read by hand.
    """
    lines = handed_in_lines(path)
    bleu, same, total = _bleu_of("\n".join(lines), split, lang)
    if same > REFERENCE_SHARE * total or bleu > BLEU_CEILING:
        raise Wrong(
            f"{Path(path).name}: {same:,} of {total:,} lines copy {split}'s references (case, spacing and "
            f"punctuation set aside, a few characters changed or words put between theirs), BLEU {bleu:.1f} "
            f"(a trained model: about 10 % and 40; refused beyond {REFERENCE_SHARE:.0%} or {BLEU_CEILING:g}): "
            f"{BY_HAND}"
        )
    return bleu
