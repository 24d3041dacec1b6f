"""``code check --watch``: check a file again each time it is saved, until Ctrl-C (rustlings' watch mode).

The file is looked at every :data:`POLL_SECONDS` (its size, its modification
time and its bytes' hash: an editor that writes a new file and renames it
over the old one is seen too); a change is checked once it has held still for
one more look, so a file half written is not run.  Ctrl-C ends the watch and
:func:`watch_file` returns the :class:`Summary`.

The line that invites the next save (``waiting``) is said only once the check
before it is counted: a Ctrl-C pressed as soon as it shows then finds that
check in the summary, however late the process was scheduled.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["POLL_SECONDS", "Summary", "watch_file"]

POLL_SECONDS = 0.3


@dataclass(frozen=True)
class Summary:
    """How a watch went: checks run, how many passed, and whether the last one did."""

    checks: int
    passes: int
    last: bool


def _look(file: Path) -> tuple[int, int, str] | None:
    try:
        st = file.stat()
        return (st.st_size, st.st_mtime_ns, hashlib.sha256(file.read_bytes()).hexdigest())
    except OSError:
        return None  # between an editor's delete and its write


def watch_file(file: Path, check: Callable[[], bool], *, waiting: Callable[[], None] = lambda: None,
               sleep: Callable[[float], None] = time.sleep,
               stop: Callable[[int], bool] = lambda checks: False) -> Summary:
    """Run ``check`` now and after each change of ``file``; return when Ctrl-C is pressed (or ``stop(checks)``
    says so: tests).  ``check`` returns whether that check passed; ``waiting`` is called after each check
    is counted (it says that the watch waits for the next save).  A check that Ctrl-C interrupts is not
    counted."""
    checks = passes = 0
    last = False
    seen = _look(file)
    try:
        last = check()
        checks, passes = 1, int(last)
        waiting()
        while not stop(checks):
            sleep(POLL_SECONDS)
            now = _look(file)
            if now is None or now == seen:
                continue
            sleep(POLL_SECONDS)
            if _look(file) != now:  # still being written
                continue
            seen = now
            last = check()
            checks += 1
            passes += int(last)
            waiting()
    except KeyboardInterrupt:
        pass
    return Summary(checks, passes, last)
