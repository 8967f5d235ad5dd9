"""The submission's process: it runs the notebook's cells, then answers the grader's requests.

Started by a :class:`book_tools.coursework.sandbox.WorkerProcess` for a
:class:`book_tools.coursework.sandbox.Sandbox` (as a user of its own where the grader runs as
root, in a throwaway folder, with a scrubbed environment), it never sees the tests, the results or
the handed-in originals: it gets the notebook's cells, then requests over the channel (call this
function with these arguments), and answers with data (:mod:`book_tools.coursework.channel`).
Before any cell runs it limits itself (CPU time, file size, memory, processes) and installs an audit
hook that refuses, and notes, what grading never needs: writing outside its folder, reading the
grading's files, opening a connection, starting a process, loading code through ``ctypes``. The hook
is a second line, not the guarantee: a determined submission can get round it inside its own
process, and then finds the operating system's limits (another user, no network, the grader's kill)
behind it.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import resource
import sys
import types
from typing import Any

channel: Any = None  # book_tools.coursework.channel, imported once the process is the sandbox's user

NOTES: list[str] = []  # what the audit hook refused, sent with every answer
_WATCHED = ("torch", "math", "numpy", "builtins", "transformer_lib", "book_tools", "sacrebleu")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def note(line: str) -> None:
    if line not in NOTES and len(NOTES) < 20:
        NOTES.append(line)


def _limit(config: dict) -> None:
    """Limits the kernel enforces on this process and its children: no exception can swallow them."""
    limits = [
        (resource.RLIMIT_CPU, config["cpu_seconds"]),
        (resource.RLIMIT_FSIZE, config["file_bytes"]),
        (resource.RLIMIT_CORE, 0),
    ]
    if config.get("processes"):  # per user: only meaningful for a user of its own
        limits.append((resource.RLIMIT_NPROC, config["processes"]))
    for which, value in limits:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(which, (value, value))


def _limit_memory(config: dict) -> None:
    with contextlib.suppress(ValueError, OSError, AttributeError):
        resource.setrlimit(resource.RLIMIT_AS, (config["memory_bytes"], config["memory_bytes"]))


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def audit_hook(folder: str, guarded: list[str]) -> Any:
    """The hook: refuses (PermissionError) and notes what grading never needs."""
    folder = os.path.realpath(folder)
    allowed_writes = (folder, "/dev/null")
    refuse_ctypes = [False]  # set once the libraries are loaded: they use ctypes while importing

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            path, mode, flags = [*args, None, None][:3]
            if not isinstance(path, (str, bytes)):
                return
            path = os.path.abspath(os.fsdecode(path))
            if _inside(path, folder):
                return
            writing = bool(mode and any(c in str(mode) for c in "wax+")) or bool(
                isinstance(flags, int) and flags & _WRITE_FLAGS
            )
            if writing and not any(_inside(path, a) for a in allowed_writes) and not path.startswith("/proc/self/"):
                note(f"wrote outside its folder ({path}): refused")
                raise PermissionError(f"{path}: a submission writes only in its own folder")
            if any(_inside(path, g) for g in guarded):
                note(f"read the grading's files ({path}): refused")
                raise PermissionError(f"{path}: the grading's files are not the submission's")
        elif event in ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo"):
            where = f"{args[0]}:{args[1]}" if event == "socket.getaddrinfo" else (args[1] if len(args) > 1 else "")
            note(f"opened a network connection ({str(where)[:60]}): refused")
            raise PermissionError("grading has no network")
        elif event in (
            "subprocess.Popen",
            "os.system",
            "os.posix_spawn",
            "os.exec",
            "os.fork",
            "os.forkpty",
            "pty.spawn",
        ):
            what = args[0] if args else event
            note(f"started a process ({str(what)[:60]}): refused")
            raise PermissionError("a submission starts no process while it is graded")
        elif event in ("os.kill", "os.killpg") and args and args[0] not in (0, os.getpid()):
            note("sent a signal to another process: refused")
            raise PermissionError("a submission signals no other process")
        elif refuse_ctypes[0] and event in ("ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle"):
            note("loaded native code through ctypes: refused")
            raise PermissionError("a submission loads no native code while it is graded")

    return hook, refuse_ctypes


def _snapshot() -> dict[tuple[str, str], Any]:
    """The functions and classes of the libraries the tests use: a change shows later."""
    found = {}
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] not in _WATCHED or not isinstance(module, types.ModuleType):
            continue
        for attr, value in list(vars(module).items()):
            if callable(value):
                found[(name, attr)] = value
    import torch

    for attr, value in list(vars(torch.Tensor).items()):
        if callable(value):
            found[("torch.Tensor", attr)] = value
    return found


def _changed(before: dict[tuple[str, str], Any]) -> list[str]:
    """What was replaced or deleted since ``_snapshot`` (PyTorch's own wrappers, which keep the
    original as ``__wrapped__``, left out: it wraps ``torch.manual_seed`` when an optimizer loads)."""
    changed = []
    for (name, attr), original in before.items():
        owner = sys.modules.get(name) if name != "torch.Tensor" else sys.modules["torch"].Tensor
        value = vars(owner).get(attr) if owner is not None else None
        if value is not original and getattr(value, "__wrapped__", None) is not original:
            changed.append(f"{name}.{attr}")
    return changed


def _stub_otter() -> None:
    """``otter`` for the notebook's own cells: grader.check and export do nothing while it is graded."""

    class Notebook:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def __getattr__(self, name: str) -> Any:
            return lambda *args, **kwargs: None

    module = types.ModuleType("otter")
    module.Notebook = Notebook
    sys.modules["otter"] = module


class Worker:
    def __init__(self, read_fd: int, write_fd: int):
        self.read_fd, self.write_fd = read_fd, write_fd
        self.objects: dict[int, Any] = {}
        self.contexts: dict[int, contextlib.ExitStack] = {}
        self.shell: Any = None
        self.before: dict[tuple[str, str], Any] = {}

    # The channel.

    def send(self, message: dict) -> None:
        message["notes"] = list(NOTES)
        channel.write_frame(self.write_fd, channel.answer(message))

    def receive(self) -> Any:
        payload = channel.read_frame(self.read_fd)
        return channel.RequestUnpickler(io.BytesIO(payload), self.objects, self.callback).load()

    def callback(self, number: int) -> Any:
        """A function of the grader's, called back over the channel."""

        def call_back(*args: Any, **kwargs: Any) -> Any:
            data = channel.as_data((args, kwargs), self.objects)
            self.send({"callback": number, "args": data[0], "kwargs": data[1]})
            kind, value = self.receive()
            if kind == "raise":
                raise RuntimeError(value)
            return value

        return call_back

    # The requests.

    def serve(self) -> None:
        while True:
            try:
                op, *args = self.receive()
            except channel.Closed:
                return
            if op == "exit":
                return
            try:
                value = getattr(self, f"op_{op}")(*args)
            except BaseException as error:  # the submission's error, in one line, as data
                if isinstance(error, (SystemExit, KeyboardInterrupt)) and op == "cells":
                    raise
                text = str(error).strip().splitlines()
                self.send({"error": type(error).__name__[:60], "message": (text[0] if text else "")[:300]})
                continue
            self.send({"value": channel.as_data(value, self.objects)})

    def op_cells(self, cells: list[tuple[int, str]]) -> None:
        for index, source in cells:
            try:
                result = self.shell.run_cell(source, store_history=False)
                error = result.error_before_exec or result.error_in_exec
            except Exception as raised:  # IPython itself could not take the cell (nested too deep to compile)
                error = raised
            line = None
            if error is not None:
                text = str(error).strip().splitlines()
                line = f"{type(error).__name__}: {text[0] if text else ''}"[:300]
            self.send({"cell": index, "failed": line})

    def op_get(self, name: str) -> Any:
        if name not in self.shell.user_ns:
            return {"missing": True}
        return {"found": self.shell.user_ns[name]}

    def op_getattr(self, obj: Any, attr: str) -> Any:
        return getattr(obj, attr)

    def op_call(self, function: Any, args: tuple, kwargs: dict) -> Any:
        return function(*args, **kwargs)

    def op_keep(self, answer: Any, args: tuple, kwargs: dict) -> list[dict]:
        """The test's objects, kept here: a handle to each, whatever it is (checks.placed)."""
        for obj in args:
            self.objects[id(obj)] = obj
        return [{channel.HANDLE: id(obj), "type": type(obj).__name__[:60], "callable": callable(obj)} for obj in args]

    def op_list(self, obj: Any) -> list:
        return list(obj)

    def op_subclass(self, obj: Any, dotted: str) -> bool:
        """``checks.built_on``, with the class ``dotted`` named before the notebook ran (a notebook that
        rebinds the name does not change the answer)."""
        from book_tools.coursework import checks

        return checks.built_on(obj, self.original(dotted))

    def original(self, dotted: str) -> Any:
        """What ``dotted`` named before the notebook ran (``_snapshot``), else what it names now."""
        from book_tools.coursework import checks

        module, _, attr = dotted.rpartition(".")
        return self.before[(module, attr)] if (module, attr) in self.before else checks.resolve(dotted)

    def op_gradient(self, function: Any, args: tuple, kwargs: dict, wrt: int) -> tuple:
        import torch

        args = list(args)
        args[wrt] = args[wrt].detach().clone().requires_grad_()
        out = function(*args, **kwargs)
        first = out[0] if isinstance(out, tuple) and out else out
        if isinstance(first, torch.Tensor) and first.requires_grad:
            first.sum().backward()
        return out, args[wrt].grad

    def op_without(self, components: list[str], owners: list[Any]) -> int:
        from book_tools.coursework import checks

        stack = contextlib.ExitStack()
        found = {}
        for dotted in components:
            with contextlib.suppress(Exception):
                found[dotted] = self.original(dotted)
        stack.enter_context(checks.without(found, checks.globals_of(*owners)))
        self.contexts[id(stack)] = stack
        return id(stack)

    def op_standing_in(self, owners: list[Any], names: dict) -> int:
        from book_tools.coursework import checks

        stack = contextlib.ExitStack()
        stack.enter_context(checks.standing_in(checks.globals_of(*owners), **names))
        self.contexts[id(stack)] = stack
        return id(stack)

    def op_restore(self, token: int) -> None:
        stack = self.contexts.pop(token, None)
        if stack is not None:
            stack.close()

    def op_notes(self) -> list[str]:
        """What the hook refused, and the libraries' functions the notebook changed (in this process only)."""
        changed = _changed(self.before)
        return NOTES + (
            [f"changed {', '.join(changed[:3])} in its own process, apart from the tests"] if changed else []
        )


CLONE_NEWNET = 0x40000000
PR_SET_NO_NEW_PRIVS = 38


def drop(uid: int, network: bool) -> None:
    """Become the sandbox: no network of its own (a namespace with none), no way back to more privileges,
    then the user ``uid`` (no groups). Run first, before anything of the package is imported."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if not network and libc.unshare(CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "cannot make a network namespace")
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if uid >= 0:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)


def main() -> None:
    """``python -I worker.py READ_FD WRITE_FD UID NETWORK IMPORT_PATHS`` (UID -1: stay who it is; the paths
    where the library and the tools are, joined by os.pathsep)."""
    global channel
    read_fd, write_fd, uid, network, paths = sys.argv[1:6]
    drop(int(uid), network == "1")
    sys.path.extend(paths.split(os.pathsep))
    from book_tools.coursework import channel as _channel

    channel = _channel
    read_fd, write_fd = int(read_fd), int(write_fd)
    if read_fd < 0:  # a probe: could it become the user and import the package?
        import torch

        os._exit(0)
    config = pickle.loads(channel.read_frame(read_fd))  # the grader's: trusted, and first
    _limit(config)
    os.chdir(config["folder"])
    import torch  # noqa: F401  (the libraries the notebook and the tests' requests use, loaded once)
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    import transformer_lib  # noqa: F401
    from book_tools.coursework import checks  # noqa: F401  (the library's checks too)

    for optional in ("numpy", "sacrebleu"):
        with contextlib.suppress(ImportError):
            __import__(optional)
    _stub_otter()
    settings = Config()
    settings.HistoryManager.enabled = False
    worker = Worker(read_fd, write_fd)
    worker.shell = InteractiveShell.instance(config=settings)
    worker.before = _snapshot()
    hook, refuse_ctypes = audit_hook(config["folder"], config["guarded"])
    sys.addaudithook(hook)
    refuse_ctypes[0] = True
    _limit_memory(config)
    worker.send({"ready": True})
    worker.serve()
    os._exit(0)


if __name__ == "__main__":
    main()
