"""Run a learner's file on a kata's cases, in a child process with limits.

The one place attn-tutor runs code: the file a learner names on ``attn-tutor
code check``, as their own program, never a file an exercise, a solution or a
pack names.  It runs under the interpreter ``--python`` names (by default the
one running attn-tutor) as ``harness.py`` (:mod:`tutor.katas.harness`), in a
session of its own (Ctrl-C reaches attn-tutor, which stops the child's process
group and, on Linux, every process started under it that still carries the
run's mark, :data:`MARK`, in its environment, even one that left the group
with ``setsid`` and was orphaned by a double fork: attn-tutor is their
reaper, ``PR_SET_CHILD_SUBREAPER``), with standard input closed, an address-space limit
(``RLIMIT_AS``), a CPU-time limit over the whole run and a wall-clock limit
per case (a case that runs past it is stopped and named), its standard output
and error captured (the first :data:`KEEP_OUTPUT` bytes of each, shown escaped
by the caller).  Events come back on a pipe of their own, so nothing the
learner prints is read as one.

:func:`run` returns a :class:`Run`: how the file loaded (or why it did not) and
each case's outputs or exception.  Pure of printing; POSIX only (``resource``).
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = ["DEFAULT_MEMORY_MB", "DEFAULT_TIME_LIMIT", "KEEP_OUTPUT", "CaseRun", "Run", "run"]

HARNESS = Path(__file__).with_name("harness.py")
DEFAULT_TIME_LIMIT = 10.0  # seconds of wall-clock time per case
LOAD_TIME_LIMIT = 120.0  # seconds to start the interpreter and import the file (PyTorch takes a few)
DEFAULT_MEMORY_MB = 2048  # the child's address space (PyTorch's import needs under 1 GiB)
KEEP_OUTPUT = 64 * 1024  # bytes of the child's standard output and error kept
MAX_EVENT = 64 * 1024 * 1024  # bytes of events read before the child is stopped as flooding
#: The variable each run sets, to a token of its own, in the environment of the learner's program: what it starts
#: inherits it, so the processes of this run left behind (orphans reparented to attn-tutor) are told apart from
#: another run's in the same process (tests run several at once) and stopped.
MARK = "ATTN_TUTOR_CODE_RUN"


@dataclass(frozen=True)
class CaseRun:
    """One case as the learner's code ran it: its outputs (as the harness sends them) or its exception."""

    id: str
    outputs: tuple[dict[str, Any], ...] | None = None
    exception: str | None = None
    traceback: str = ""
    peak: int | None = None  # bytes NumPy allocated at most during the case (when traced)


Status = Literal["ran", "syntax", "load_error", "missing", "hang", "crash", "no_python", "tampered"]


@dataclass(frozen=True)
class Run:
    """The whole run: ``status`` "ran" when every case was called (some may have raised); else why not.

    ``hang_case`` the case that ran past its limit (``None`` while loading) for "hang";
    ``detail`` the event's fields for "syntax", "load_error", "missing"; ``returncode``
    and ``signal`` for "crash" (the child died: out of memory, killed, exited mid-case).
    """

    status: Status
    flavour: str | None = None
    cases: tuple[CaseRun, ...] = ()
    why: str = ""  # why the file is in that flavour (the harness's reason: "imports torch", "class" ...)
    detail: dict[str, Any] = field(default_factory=dict)
    hang_case: str | None = None
    stdout: str = ""
    stderr: str = ""
    returncode: int | None = None
    #: How many cases the file's flavour has (the harness's ``loaded`` event; ``None`` before it): after a
    #: hang or a crash, those neither reported nor stopped were never run.
    planned: int | None = None
    #: Bytes of standard output and error the child wrote beyond the :data:`KEEP_OUTPUT` kept of each.
    stdout_dropped: int = 0
    stderr_dropped: int = 0


def _limits(memory_mb: int, cpu_seconds: int) -> Any:
    def apply() -> None:  # runs in the child between fork and exec
        import resource

        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        if sys.platform == "linux":  # killed with attn-tutor, however attn-tutor ends (PR_SET_PDEATHSIG = 1)
            import ctypes

            ctypes.CDLL(None).prctl(1, signal.SIGKILL)

    return apply


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux ``prctl(PR_SET_CHILD_SUBREAPER, 1)``): a
    process the learner's program started, whose parent has died, is then reparented to attn-tutor, not to init,
    where :func:`_stop_left_behind` finds it.  Whether that holds (``False`` elsewhere)."""
    if sys.platform != "linux":
        return False
    try:
        import ctypes

        return bool(ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0)  # PR_SET_CHILD_SUBREAPER = 36
    except (OSError, AttributeError):
        return False


def _children() -> list[int]:
    """The pids whose parent is this process (``/proc/<pid>/stat``'s fourth field), zombies left out."""
    me, found = os.getpid(), []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and fields[0] != b"Z" and int(fields[1]) == me:
            found.append(int(entry.name))
    return found


def _marked(pid: int, token: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f"{MARK}={token}".encode() in f.read().split(b"\0")
    except OSError:
        return False


def _stop_left_behind(token: str) -> None:
    """Kill and reap this run's processes reparented to attn-tutor (orphans of the learner's program: a double fork,
    ``setsid``), and theirs as they in turn are reparented, until none is left (at most 100 rounds)."""
    for _ in range(100):
        pids = [pid for pid in _children() if _marked(pid, token)]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in pids:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def run(file: Path, request: dict[str, Any], cases: Sequence[dict[str, Any]], *, python: str | None = None,
        time_limit: float = DEFAULT_TIME_LIMIT, memory_mb: int = DEFAULT_MEMORY_MB,
        environ: Mapping[str, str] | None = None) -> Run:
    """Run ``file`` on ``cases`` (the harness's request: the kata's names, each case's arguments).

    ``python``: the interpreter (default: ``sys.executable``); ``environ``: the variables the
    learner's program runs with (attn-tutor's own run's, :attr:`tutor.base.env.Env.environ`;
    default this process's).  Raises nothing for
    what the learner's code does (it is reported in the :class:`Run`); raises
    ``KeyboardInterrupt`` after stopping the child when the learner presses Ctrl-C.
    """
    file = file.resolve()  # the child runs in the file's folder
    with tempfile.TemporaryDirectory(prefix="attn-tutor-code-") as tmp:
        req = Path(tmp) / "request.json"
        req.write_text(json.dumps({**request, "file": str(file), "cases": list(cases)}), encoding="utf-8")
        read_fd, write_fd = os.pipe()
        token = os.urandom(8).hex()
        reaper = _become_subreaper()
        if environ is None:  # this process's variables, read where attn-tutor reads its environment
            from ..base.env import Env

            environ = Env.from_process(language="en").environ
        env = {**environ, MARK: token}
        cpu = int(LOAD_TIME_LIMIT + time_limit * max(1, len(cases))) + 1
        try:
            proc = subprocess.Popen(
                # -B: no __pycache__ beside the learner's file; -u: output as written; -X utf8: UTF-8 streams
                [python or sys.executable, "-B", "-u", "-X", "utf8", str(HARNESS), str(req), str(write_fd)],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                pass_fds=(write_fd,), start_new_session=True, env=env, cwd=str(file.parent),
                preexec_fn=_limits(memory_mb, cpu),  # noqa: PLW1509 -- only setrlimit and signal dispositions
            )
        except OSError as err:
            from ..base.outfile import os_reason

            os.close(read_fd)
            os.close(write_fd)
            return Run("no_python", detail={"python": python or sys.executable, "reason": os_reason(err)})
        os.close(write_fd)
        previous = _stop_on_hangup()
        try:
            return _watch(proc, read_fd, time_limit)
        except BaseException:
            _kill(proc)
            raise
        finally:
            os.close(read_fd)
            if reaper:  # what the program started and left behind goes with it, however the run ended
                _stop_left_behind(token)
            _restore(previous)


def _stop_on_hangup() -> dict[int, Any]:
    """SIGTERM and SIGHUP (a closed terminal, ``kill``) stop the check as Ctrl-C does: the child is killed and
    the temporary folder removed.  Only in the main thread (where Python runs signal handlers)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return {}

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    return {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGHUP)}


def _restore(previous: dict[int, Any]) -> None:
    for s, handler in previous.items():
        signal.signal(s, handler)


def _watch(proc: subprocess.Popen[bytes], events_fd: int, time_limit: float) -> Run:
    assert proc.stdout is not None and proc.stderr is not None
    sel = selectors.DefaultSelector()
    sel.register(events_fd, selectors.EVENT_READ, "events")
    sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
    sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
    kept = {"stdout": bytearray(), "stderr": bytearray()}
    dropped = {"stdout": 0, "stderr": 0}  # bytes written beyond what is kept: the report says they were cut
    pending = bytearray()
    events: list[dict[str, Any]] = []
    deadline = time.monotonic() + LOAD_TIME_LIMIT
    current: str | None = None
    expected, done = -1, 0
    received = 0
    open_streams = 3
    while open_streams:
        timeout = deadline - time.monotonic()
        if timeout <= 0:
            _kill(proc)
            return _finish(proc, events, kept, dropped, hang=True, hang_case=current)
        for key, _ in sel.select(timeout):
            fd = key.fd if key.data == "events" else key.fileobj
            chunk = os.read(fd if isinstance(fd, int) else fd.fileno(), 65536)
            if not chunk:
                sel.unregister(key.fileobj)
                open_streams -= 1
                continue
            if key.data != "events":
                room = KEEP_OUTPUT - len(kept[key.data])
                kept[key.data] += chunk[:max(0, room)]
                dropped[key.data] += max(0, len(chunk) - max(0, room))
                continue
            received += len(chunk)
            if received > MAX_EVENT:
                _kill(proc)
                return _finish(proc, events, kept, dropped)
            pending += chunk
            while b"\n" in pending:
                line, _, rest = pending.partition(b"\n")
                pending = bytearray(rest)
                event = _event(bytes(line))
                if event is None:  # not what the harness writes: the learner's code wrote on the pipe
                    _kill(proc)
                    return Run("tampered", **_common(proc, kept, dropped))
                events.append(event)
                if event["event"] == "loaded":
                    expected = event["cases"]
                if event["event"] == "start":
                    current = event["id"]
                    deadline = time.monotonic() + time_limit
                elif event["event"] in ("result", "error"):
                    current = None
                    done += 1
                    if done == expected:  # every case reported: a thread or a child left running is not waited for
                        _kill(proc)
                        return _finish(proc, events, kept, dropped, all_reported=True)
    proc.wait()
    return _finish(proc, events, kept, dropped)


_FIELDS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "syntax": {"message": str, "text": str},
    "load_error": {"traceback": str, "exception": str},
    "missing": {"wanted": list, "defined": list},
    "loaded": {"flavour": str, "why": str, "cases": int},
    "start": {"id": str},
    "result": {"id": str, "outputs": list},
    "error": {"id": str, "traceback": str, "exception": str},
}


def _event(line: bytes) -> dict[str, Any] | None:
    """One event as the harness writes it, its fields of their types; ``None`` for anything else."""
    try:
        event = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(event, dict) or event.get("event") not in _FIELDS:
        return None
    fields = _FIELDS[event["event"]]
    if not all(isinstance(event.get(k), t) for k, t in fields.items()):
        return None
    if event["event"] == "loaded" and event["flavour"] not in ("numpy", "torch"):
        return None
    if event["event"] == "missing" and not all(isinstance(n, str) for n in event["defined"]):
        return None
    if event["event"] == "result" and not all(isinstance(o, dict) for o in event["outputs"]):
        return None
    return event


def _common(proc: subprocess.Popen[bytes], kept: dict[str, bytearray],
            dropped: dict[str, int] | None = None) -> dict[str, Any]:
    cut = dropped or {}
    return {"stdout": kept["stdout"].decode("utf-8", "replace"), "stderr": kept["stderr"].decode("utf-8", "replace"),
            "returncode": proc.returncode, "stdout_dropped": cut.get("stdout", 0),
            "stderr_dropped": cut.get("stderr", 0)}


def _finish(proc: subprocess.Popen[bytes], events: list[dict[str, Any]], kept: dict[str, bytearray],
            dropped: dict[str, int], *, hang: bool = False, hang_case: str | None = None,
            all_reported: bool = False) -> Run:
    common = _common(proc, kept, dropped)
    for e in events:
        if e["event"] in ("syntax", "load_error", "missing"):
            return Run(e["event"], detail=e, **common)
    loaded = next((e for e in events if e["event"] == "loaded"), {})
    flavour, why = loaded.get("flavour"), str(loaded.get("why", ""))
    cases = tuple(
        CaseRun(e["id"], tuple(e["outputs"]), peak=e.get("peak")) if e["event"] == "result"
        else CaseRun(e["id"], exception=e["exception"], traceback=e["traceback"])
        for e in events if e["event"] in ("result", "error"))
    planned = loaded.get("cases")
    if hang:
        return Run("hang", flavour, cases, why=why, hang_case=hang_case, planned=planned, **common)
    started = [e["id"] for e in events if e["event"] == "start"]
    if not all_reported and (flavour is None or len(cases) < len(started) or proc.returncode != 0):
        return Run("crash", flavour, cases, why=why, hang_case=started[-1] if len(cases) < len(started) else None,
                   planned=planned, **common)
    return Run("ran", flavour, cases, why=why, planned=planned, **common)
