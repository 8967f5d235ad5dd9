"""Where a submission's code runs while it is graded: a process of its own, apart from the tests.

Two parts: a :class:`WorkerProcess` owns the process's life, and :class:`Sandbox` the grader's
conversation with the code in it. The process runs :mod:`book_tools.coursework.worker` in a
throwaway folder with a scrubbed environment and the kernel's limits (CPU time, file size, memory,
processes). Where the grader runs as root (a
container, Gradescope) the process is also a user of its own, a number no account has, chosen
afresh for each grading, without network (a namespace with none): it can read neither the tests,
nor the results, nor the copies of the handed-in files the grader scores, all in a folder only
root reads, and it can write only in its own. Where the grader cannot switch users (an
instructor's own account), the process is the grader's user, which the operating system cannot
keep from the grader's files: the audit hook of :mod:`book_tools.coursework.worker` refuses them instead, which a
determined submission can get round (the instructors' page says so). Everything the tests compare
is computed here, in the grader's process, on data the submission's process sent back.

The limits are kept from outside: a call that runs past its seconds, a cell past its own, a process
that writes more than its share of the disk is killed (every process of its user, or carrying its
grading's mark, with it), and the next request starts a new process that runs the notebook's cells
again, less the cell that was stopped. Nothing is left behind: at the end every process of the
grading is killed and its folders and the files its user left in the shared temporary folders are
removed, killed or not; what was found is noted (``Sandbox.notes``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import book_tools
import transformer_lib
from book_tools.coursework import channel, checks
from book_tools.coursework.channel import RemoteError, Stopped  # the checks turn them into Wrong

CELL_SECONDS = 60  # any one cell of a submission
START_SECONDS = 120  # a new process, to import PyTorch and be ready
DISK_BYTES = 512 * 2**20  # what a submission may write in all: its folder and the shared temporary folders
FILE_BYTES = 256 * 2**20  # any one file it writes (the kernel's limit: a larger write fails)
OUTPUT_BYTES = 16 * 2**20  # printed: read and thrown away; more than this is noted
MEMORY_BYTES = 16 * 2**30  # address space (PyTorch reserves far more than it uses)
PROCESSES = 512  # processes and threads of its user, where it has one
SHARED_TEMPORARY = ("/tmp", "/var/tmp", "/dev/shm")
WORKER = Path(__file__).with_name("worker.py")
# Where the worker finds the library and the tools, installed or in a checkout (it runs with -I).
IMPORT_PATHS = os.pathsep.join(
    str(Path(package.__file__).resolve().parents[1]) for package in (transformer_lib, book_tools)
)
MODE = "TRANSFORMER_LIB_SANDBOX"  # "process": never switch users (tests of that path; a machine that forbids it)
_KEPT_ENVIRONMENT = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


class OutOfTime(BaseException):  # not an Exception: a test's ``except Exception`` must not swallow it
    """The grading as a whole ran past its time: what is left is not graded."""


class Remote(channel.Handle):
    """An object that lives in the submission's process: a function, a module, a bound method.

    Calling it, reading an attribute or iterating over it is a request (data back, or another
    handle), each under ``checks.CALL_SECONDS`` unless :func:`transformer_lib.coursework.checks.call` gives its own.
    """

    __slots__ = ("_callable", "_generation", "_remote_id", "_root", "_sandbox", "_type")

    def __init__(self, sandbox: Sandbox, number: int, kind: str, is_callable: bool, root: str):
        object.__setattr__(self, "_sandbox", sandbox)
        object.__setattr__(self, "_remote_id", number)
        object.__setattr__(self, "_generation", sandbox.generation)
        object.__setattr__(self, "_type", kind)
        object.__setattr__(self, "_callable", is_callable)
        object.__setattr__(self, "_root", root)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._sandbox.ask(("call", self, args, kwargs), root=self._root, handle=self)

    def _call_there(self, args: tuple, kwargs: dict, name: str, seconds: float) -> Any:
        return checks.remote_call(self, args, kwargs, name, seconds)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # no protocol of Python's or PyTorch's is asked of the submission
            raise AttributeError(name)
        try:
            return self._sandbox.ask(("getattr", self, name), root=self._root, handle=self)
        except RemoteError as error:
            if error.kind == "AttributeError":
                raise AttributeError(name) from None
            raise

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("an object of the submission's is changed only by its own code")

    def __iter__(self) -> Any:
        return iter(self._sandbox.ask(("list", self), root=self._root, handle=self))

    def __repr__(self) -> str:
        return f"<{self._type} of the submission's>"


@dataclass(frozen=True)
class Isolation:
    """How far a submission's process can be kept apart on this machine."""

    users: bool  # a user of its own for each grading (the grader runs as root, and that user can run Python)
    network: bool  # a network namespace with no network in it

    def describe(self) -> str:
        if self.users:
            return "a user of its own" + (", no network" if self.network else "")
        return "the grader's own user (the operating system cannot keep it from the grader's files)"


def _launch(uid: int, cut_network: bool, read_fd: int, write_fd: int, **popen: Any) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-I",
            str(WORKER),
            str(read_fd),
            str(write_fd),
            str(uid),
            "0" if cut_network else "1",
            IMPORT_PATHS,
        ],
        start_new_session=True,
        close_fds=True,
        **popen,
    )


@functools.cache
def isolation() -> Isolation:
    """What this machine allows, tried once: a process as another user, in a namespace without network."""
    if os.environ.get(MODE) == "process" or not sys.platform.startswith("linux") or os.geteuid() != 0:
        return Isolation(users=False, network=False)
    uid = free_uid()
    for network in (True, False):
        try:
            probe = _launch(
                uid,
                network,
                -1,
                -1,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=_environment(Path("/"), "probe"),
                cwd="/",
            )
            if probe.wait(timeout=START_SECONDS) == 0:
                return Isolation(users=True, network=network)
        except (OSError, subprocess.TimeoutExpired):
            with contextlib.suppress(Exception):
                probe.kill()
    return Isolation(users=False, network=False)


def new_mark() -> str:
    """A grading's mark: in its processes' environment and its folders' names, so that they can be found."""
    return f"tl-grading-{secrets.token_hex(8)}"


def free_uid() -> int:
    """A user id no account and no process has: each grading gets its own, so that killing every
    process of that user kills its processes only."""
    taken = {int(line.split(":")[2]) for line in _read("/etc/passwd").splitlines() if line.count(":") >= 3}
    running = {uid for _, uid in _processes()}
    while True:
        uid = random.randrange(200_000, 2_000_000)
        if uid not in taken and uid not in running:
            return uid


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _processes() -> list[tuple[int, int]]:
    """(pid, uid) of every live process (zombies left out: they are only waiting to be reaped)."""
    found = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        status = _read(f"/proc/{entry}/status")
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if not fields or fields.get("State", "").strip().startswith("Z"):
            continue
        with contextlib.suppress(ValueError, IndexError):
            found.append((int(entry), int(fields["Uid"].split()[1])))
    return found


def _marked(pid: int, mark: str) -> bool:
    try:
        return mark.encode() in Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False


def _of_grading(uid: int, mark: str) -> list[int]:
    """Every process of a grading's submission: its user's (where it has one), or carrying its mark."""
    mine = os.getpid()
    return [pid for pid, owner in _processes() if pid != mine and ((uid >= 0 and owner == uid) or _marked(pid, mark))]


def _kill_grading(uid: int, mark: str) -> None:
    for _ in range(200):
        pids = _of_grading(uid, mark)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)


def clean_up(uid: int, mark: str) -> None:
    """After a grading, whatever became of its grader's process: its submission's processes killed, its
    folders (named by its mark) and its user's files in the shared temporary folders removed."""
    _kill_grading(uid, mark)
    for folder in Path(tempfile.gettempdir()).glob(f"{mark}*"):
        remove(folder)
    if uid >= 0:
        for path in _owned_by(uid):
            remove(path)


def remove(path: Path) -> None:
    """``path`` gone: a file, a link, or a folder with everything in it however deep. A submission can
    nest folders past Python's recursion limit, where ``shutil.rmtree`` raises RecursionError; ``rm``
    does not recurse on a stack, so it removes what is left."""
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    except (OSError, RecursionError):
        pass
    if os.path.lexists(path):
        subprocess.run(["rm", "-rf", "--", str(path)], capture_output=True, check=False)


def _owned_by(uid: int) -> list[Path]:
    found = []
    for folder in SHARED_TEMPORARY:
        with contextlib.suppress(OSError):
            for entry in os.scandir(folder):
                with contextlib.suppress(OSError):
                    if entry.stat(follow_symlinks=False).st_uid == uid:
                        found.append(Path(entry.path))
    return found


def _environment(folder: Path, mark: str) -> dict[str, str]:
    """A scrubbed environment: the locale and the path, a home in its folder, the grading's mark."""
    env = {k: os.environ[k] for k in _KEPT_ENVIRONMENT if k in os.environ}
    env.update(
        HOME=str(folder),
        TMPDIR=str(folder),
        USER="submission",
        LOGNAME="submission",
        MPLBACKEND="Agg",
        IPYTHONDIR=str(folder / ".ipython"),
        PYTHONDONTWRITEBYTECODE="1",
        TL_GRADING=mark,
    )
    return env


def _size(path: Path) -> int:
    """Bytes on disk under ``path``, links not followed, as ``du`` counts them: it walks folders nested
    past any path's length (a submission can nest them to hide what it writes from a walk by path,
    and past Python's recursion limit). Walked here where there is no ``du``."""
    with contextlib.suppress(OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        done = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, timeout=30)
        return int(done.stdout.split()[0]) * 1024
    total, stack = 0, [str(path)]
    while stack:
        current = stack.pop()
        with contextlib.suppress(OSError):
            total += os.lstat(current).st_blocks * 512
            if os.path.isdir(current) and not os.path.islink(current):
                stack += [entry.path for entry in os.scandir(current)]
    return total


class WorkerProcess:
    """One grading's worker process (one at a time), and everything it may leave behind.

    It owns the grading's folders (named by its mark) and the processes of its user or mark: it
    spawns :mod:`book_tools.coursework.worker` in a fresh copy of its folder with the kernel's
    limits, reads and throws away what the process prints, stops it when it writes more than its
    share of the disk, kills it with everything it started, and at the end removes what it left in
    the shared temporary folders. What it finds it says through ``note``. What is asked of the
    process, and when it is started again, is :class:`Sandbox`'s.
    """

    def __init__(
        self,
        hand_ins: dict[str, bytes],
        mark: str,
        isolation: Isolation,
        uid: int | None,
        guarded: list[str],
        note: Callable[[str], None],
    ):
        self.hand_ins, self.mark, self.isolation, self.note = hand_ins, mark, isolation, note
        self.root = Path(tempfile.gettempdir(), mark)
        self.root.mkdir(mode=0o711)
        self.root.chmod(0o711)  # its user may pass through to its folder, not list what else is here
        self.folder = self.root / "work"
        self.guarded = [str(self.root), *guarded]
        self.uid = (uid if uid is not None else free_uid()) if isolation.users else -1
        self.process: subprocess.Popen | None = None
        self.send_fd = self.read_fd = -1
        self.printed = 0
        self.tail = b""  # the last of what it printed, for whoever debugs the grader
        self.stop_why = ""  # why it was stopped from inside the grader, when it was

    @property
    def spawned(self) -> bool:
        """Whether a process was spawned and not killed since (it may have ended on its own)."""
        return self.process is not None

    @property
    def alive(self) -> bool:
        """Whether a process was spawned and is still running."""
        return self.process is not None and self.process.poll() is None

    def spawn(self, deadline: float) -> None:
        """A new process in a fresh copy of the folder, sent its limits (its CPU time from ``deadline``)."""
        self._prepare_folder()
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        try:
            self.process = _launch(
                self.uid,
                self.isolation.network,
                to_worker_r,
                from_worker_w,
                pass_fds=(to_worker_r, from_worker_w),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=_environment(self.folder, self.mark),
                cwd=str(self.folder),
            )
        finally:
            os.close(to_worker_r)
            os.close(from_worker_w)
        self.send_fd, self.read_fd = to_worker_w, from_worker_r
        self.stop_why = ""
        threading.Thread(target=self._drain, args=(self.process,), daemon=True).start()
        threading.Thread(target=self._watch_disk, args=(self.process,), daemon=True).start()
        config = {
            "folder": str(self.folder),
            "guarded": self.guarded,
            "cpu_seconds": max(60, int(deadline - time.monotonic()) * 2 * (os.cpu_count() or 1)),
            "file_bytes": FILE_BYTES,
            "memory_bytes": MEMORY_BYTES,
            "processes": PROCESSES if self.uid >= 0 else 0,
        }
        self.send(pickle.dumps(config))

    def send(self, data: bytes) -> None:
        """One frame to the process (:class:`book_tools.coursework.channel.Closed` if it is gone)."""
        channel.write_frame(self.send_fd, data)

    def read(self, deadline: float) -> bytes:
        """The process's next frame; TimeoutError after ``deadline``, ``Closed`` if it is gone."""
        return channel.read_frame(self.read_fd, deadline)

    def _prepare_folder(self) -> None:
        remove(self.folder)
        self.folder.mkdir(mode=0o700)
        for name, data in self.hand_ins.items():  # its own copies: what it does to them is scored nowhere
            (self.folder / name).write_bytes(data)
        if self.uid >= 0:
            for path in [self.folder, *self.folder.rglob("*")]:
                os.chown(path, self.uid, self.uid)

    def _drain(self, process: subprocess.Popen) -> None:
        """The process's printout, read and thrown away: a huge output fills nothing."""
        while chunk := process.stdout.read1(1 << 16) if process.stdout else b"":
            self.printed += len(chunk)
            self.tail = (self.tail + chunk)[-4096:]
            if self.printed > OUTPUT_BYTES:
                self.note(f"printed more than {OUTPUT_BYTES // 2**20} MB: thrown away unread")

    def _watch_disk(self, process: subprocess.Popen) -> None:
        while process.poll() is None:
            used = _size(self.folder) + sum(_size(p) for p in self._left_in_temporary())
            if used > DISK_BYTES:
                self.note(f"wrote more than {DISK_BYTES // 2**20} MB to disk: stopped")
                self.stop_why = f"it wrote more than {DISK_BYTES // 2**20} MB to disk and was stopped"
                self._kill_processes()
                return
            time.sleep(0.2)

    def _left_in_temporary(self) -> list[Path]:
        """What its user owns in the shared temporary folders (none where it has no user of its own)."""
        return _owned_by(self.uid) if self.uid >= 0 else []

    def left_running(self) -> bool:
        """Whether a process of the grading other than the worker itself is running."""
        worker = self.process.pid if self.process is not None else None
        return any(pid != worker for pid in _of_grading(self.uid, self.mark))

    def rewritten(self) -> list[str]:
        """The handed-in files the process changed in its own copies."""
        changed = []
        for name, data in self.hand_ins.items():
            copy = self.folder / name
            with contextlib.suppress(OSError):
                if copy.is_file() and (copy.stat().st_size != len(data) or copy.read_bytes() != data):
                    changed.append(name)
        return changed

    def _kill_processes(self) -> None:
        if self.process is not None:
            with contextlib.suppress(OSError):
                os.killpg(self.process.pid, signal.SIGKILL)
        _kill_grading(self.uid, self.mark)

    def kill(self) -> None:
        """The process and everything it started killed, and its pipes closed."""
        self._kill_processes()
        if self.process is not None:
            with contextlib.suppress(Exception):
                self.process.wait(timeout=10)
            for fd in (self.send_fd, self.read_fd):
                with contextlib.suppress(OSError):
                    os.close(fd)
            self.process = None

    def remove(self) -> None:
        """What its user left in the shared temporary folders noted and removed, and its folders with it."""
        left = self._left_in_temporary()
        if left:
            self.note(f"left files in {', '.join(sorted({str(p.parent) for p in left}))}: removed")
        for path in left:
            remove(path)
        remove(self.root)


class Sandbox:
    """The grader's conversation with a submission's code: its notebook run, its names asked for.

    Its :class:`WorkerProcess` is started on the first request, and again (the notebook run anew,
    less the cells that were stopped) after it was stopped; a call or a cell past its time kills it.
    """

    def __init__(
        self,
        cells: list[tuple[int, str]],
        hand_ins: dict[str, bytes],
        deadline: float,
        *,
        guarded: list[str] = (),
        isolation: Isolation | None = None,
        cell_seconds: float = CELL_SECONDS,
        mark: str | None = None,
        uid: int | None = None,
    ):
        self.cells, self.hand_ins, self.deadline = cells, hand_ins, deadline
        self.isolation = isolation if isolation is not None else Isolation(False, False)
        self.cell_seconds = cell_seconds
        self.mark = mark or new_mark()
        self.stopped_cells: dict[int, str] = {}  # cells stopped from outside: index → why, as the notebook would say
        self.failed_cells: dict[int, str] = {}  # cells that raised, in the last run of the notebook
        self.notes: list[str] = []  # what was refused or stopped, one line each
        self.endless: set[str] = set()  # the names whose calls were stopped: not waited for again
        self.generation = 0  # how many times its process was killed: a handle from before is stale
        self.worker = WorkerProcess(hand_ins, self.mark, self.isolation, uid, list(guarded), self.note)
        self._callbacks: dict[int, Any] = {}

    def note(self, line: str) -> None:
        """One line of what was refused or stopped, once."""
        if line not in self.notes:
            self.notes.append(line)

    def kill(self) -> None:
        """Stop the process and everything it started; the next request starts a new one."""
        self.worker.kill()
        self.generation += 1

    def start(self) -> None:
        """A new process that runs the notebook's cells, less those stopped before; a cell that runs past
        its time or ends the process is stopped, and the notebook runs again without it."""
        while True:
            self._check_time()
            self.failed_cells = dict(self.stopped_cells)
            self.worker.spawn(self.deadline)
            try:
                self._receive(min(self.deadline, time.monotonic() + START_SECONDS))
            except Stopped as stopped:
                self.kill()
                raise Stopped(f"the submission's process could not start ({stopped})") from None
            cells = [(i, source) for i, source in self.cells if i not in self.stopped_cells]
            self.worker.send(channel.request(("cells", cells), self._callbacks))
            ran = True
            for index, _ in cells:
                try:
                    frame = self._receive(min(self.deadline, time.monotonic() + self.cell_seconds))
                except Stopped as stopped:
                    self.kill()
                    self._check_time()
                    why = str(stopped)
                    if why.startswith("stopped after"):
                        why = (
                            f"TimeoutError: this cell ran for more than {self.cell_seconds:g} s "
                            "and was stopped (an endless loop?)"
                        )
                        self.note(f"a cell ran past {self.cell_seconds:g} s: stopped from outside")
                    else:
                        why = f"the notebook's process ended in this cell: {why}"
                    self.stopped_cells[index] = why
                    ran = False
                    break
                if frame.get("cell") != index:
                    self.kill()
                    raise Stopped("the submission's process broke the grading channel")
                if frame.get("failed"):
                    self.failed_cells[index] = str(frame["failed"])
            if ran:
                try:
                    self._receive(min(self.deadline, time.monotonic() + self.cell_seconds))  # the cells' end
                except Stopped:
                    self.kill()
                    continue
                return

    def _check_time(self) -> None:
        if time.monotonic() >= self.deadline:
            self.kill()
            raise OutOfTime

    def _receive(self, deadline: float) -> dict:
        """The next answer: callbacks served on the way; Stopped if it does not come in time or is not data."""
        while True:
            try:
                frame = channel.read_answer(self.worker.read(deadline))
            except TimeoutError:
                raise Stopped(f"stopped after {max(0.0, deadline - self._asked):.0f} s") from None
            except channel.Closed as closed:
                raise Stopped(self.worker.stop_why or str(closed)) from None
            if not isinstance(frame, dict):
                raise Stopped("the submission's process broke the grading channel")
            for line in frame.get("notes") or []:
                if isinstance(line, str):
                    self.note(line[:200])
            if "callback" not in frame:
                return frame
            function = self._callbacks.get(frame.get("callback"))
            try:
                reply = (
                    "reply",
                    function(*self._handles(frame.get("args", ())), **self._handles(frame.get("kwargs", {}))),
                )
            except Exception as error:
                reply = ("raise", f"{type(error).__name__}: {error}")
            self.worker.send(channel.request(reply, self._callbacks))

    _asked = 0.0

    def ask(self, request: tuple, root: str = "", handle: Remote | None = None, seconds: float | None = None) -> Any:
        """One request's answer: data, or handles for what is not. RemoteError when the submission's code
        raised; Stopped when it ran past ``seconds`` (then it is killed) or broke the channel."""
        from transformer_lib.coursework.checks import CALL_SECONDS

        if handle is not None and handle._generation != self.generation:
            raise Stopped("its process was stopped earlier (a call ran too long?)")
        if root and root in self.endless:
            raise Stopped("was stopped earlier after running too long: is there an endless loop?")
        if not self.worker.spawned:
            self.start()
        seconds = CALL_SECONDS if seconds is None else seconds
        self._check_time()
        self._asked = time.monotonic()
        try:
            self.worker.send(channel.request(request, self._callbacks))
            frame = self._receive(min(self.deadline, self._asked + seconds))
        except (Stopped, channel.Closed) as stopped:
            self.kill()
            self._check_time()
            if str(stopped).startswith("stopped after"):
                self.endless.add(root)
                self.note(f"a call ran past {seconds:g} s: stopped from outside")
                raise Stopped(f"stopped after {seconds:g} s: is there an endless loop?") from None
            raise Stopped(str(stopped)) from None
        if "error" in frame:
            raise RemoteError(str(frame["error"]), str(frame.get("message", "")))
        return self._handles(frame.get("value"), root)

    def _handles(self, value: Any, root: str = "") -> Any:
        """The answer's handles made :class:`Remote` (a handle is the only dict with its key)."""
        if isinstance(value, dict):
            if channel.HANDLE in value:
                return Remote(
                    self, value[channel.HANDLE], str(value.get("type", "")), bool(value.get("callable")), root
                )
            return {k: self._handles(v, root) for k, v in value.items()}
        if isinstance(value, list):
            return [self._handles(v, root) for v in value]
        if isinstance(value, tuple):
            return tuple(self._handles(v, root) for v in value)
        return value

    def get(self, name: str) -> Any:
        """The notebook's ``name``: data, a :class:`Remote`, or None when no cell defined it (as Otter passes)."""
        found = self.ask(("get", name))
        value = None if found.get("missing") else found.get("found")
        if isinstance(value, Remote):  # what is asked of it is its name's: a call stopped stops the name
            object.__setattr__(value, "_root", name)
        return value

    def close(self) -> None:
        """The end of the grading: what it left running or lying about is noted, then killed and removed."""
        if self.worker.alive:
            with contextlib.suppress(Stopped, RemoteError, OutOfTime):
                for line in self.ask(("notes",), seconds=10):
                    if isinstance(line, str):
                        self.note(line[:200])
            if self.worker.left_running():
                self.note("left a process running after its notebook ended: stopped")
        for name in self.worker.rewritten():  # its own copies: the grader scores those it made before
            self.note(f"rewrote {name} while it ran: the copy made before it ran is what is scored")
        self.kill()
        self.worker.remove()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
