"""The HTML page printed to PDF by headless Chromium: what ``explain --export page.pdf`` writes.

:func:`find_chromium` looks for the browser on ``PATH`` (Debian's
``chromium``, ``chromium-browser``, ``google-chrome``); :func:`print_pdf`
writes the page to a temporary folder and runs
``chromium --headless --print-to-pdf`` on it in a child process of its own
session, with no network (``--no-proxy-server``, and the page fetches
nothing), a temporary profile (``--user-data-dir``), and a timeout after
which the child and everything it started are killed -- as they are when
attn-tutor is stopped while it waits (Ctrl-C, SIGTERM, SIGHUP: each raises
``KeyboardInterrupt`` there) or anything else goes wrong.  Errors are
:class:`~tutor.base.errors.TutorError` with one sentence each (exit 2).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..base.errors import TutorError
from ..base.messages import t

#: The names headless Chromium goes by, in the order they are looked for.
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
TIMEOUT = 300  # seconds a print may take before Chromium is stopped (the page of an exercise at the size limits took 80 s on 2 busy cores)


def find_chromium(environ: Mapping[str, str]) -> str | None:
    """The path of the first of :data:`BROWSERS` on the ``PATH`` of ``environ`` (the run's variables,
    :attr:`tutor.base.env.Env.environ`; without ``PATH``, :data:`os.defpath` as ``execvp`` would), or ``None``."""
    for name in BROWSERS:
        found = shutil.which(name, path=environ.get("PATH", os.defpath))
        if found is not None:
            return found
    return None


def no_chromium(path: Path) -> TutorError:
    """The error for a PDF asked for without Chromium: how to get it."""
    return TutorError(t("pdf.no_chromium", path=path, names=t("list.sep").join(BROWSERS)))


def print_pdf(page: str, path: Path, environ: Mapping[str, str], *, browser: str | None = None,
              timeout: float = TIMEOUT, say: Callable[[str], None] | None = None) -> bytes:
    """The PDF of the HTML ``page`` (a complete document, UTF-8), printed by headless Chromium.

    ``environ``: the run's variables, where Chromium is looked for and what it runs with (``HOME`` a temporary
    folder); ``browser``: the executable (default :func:`find_chromium`); ``path``: the file the PDF is for (named
    in the errors).  Raises :class:`TutorError` when there is no browser, when it fails or writes nothing, and when it
    has not finished after ``timeout`` seconds (its whole process group is killed first).  ``say``: told one
    line (that the page is being printed, and for how long at most) once Chromium is started, before the wait.
    SIGTERM and SIGHUP during the wait raise ``KeyboardInterrupt`` (as Ctrl-C does) after Chromium's process
    group is killed; any exception kills it too.
    """
    browser = browser or find_chromium(environ)
    if browser is None:
        raise no_chromium(path)
    with tempfile.TemporaryDirectory(prefix="attn-tutor-pdf-") as tmp:
        html_file, out = Path(tmp) / "page.html", Path(tmp) / "page.pdf"
        html_file.write_text(page, encoding="utf-8")
        argv = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-proxy-server", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
                "--disable-sync", "--no-pdf-header-footer", f"--user-data-dir={Path(tmp) / 'profile'}",
                f"--print-to-pdf={out}", html_file.as_uri()]
        previous = _stop_on_hangup()  # before the child exists: a signal in between cannot leave it behind
        try:
            child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     start_new_session=True, env={**environ, "HOME": tmp})
            try:
                if say is not None:
                    say(t("pdf.printing", path=path, browser=browser, seconds=f"{timeout:g}"))
                _, err = child.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill(child)
                raise TutorError(t("pdf.timeout", path=path, browser=browser, seconds=f"{timeout:g}")) from None
            finally:
                _kill(child)  # what it started and left behind (a zygote, a crashpad handler); on any exception too
        finally:
            _restore(previous)
        if child.returncode != 0 or not out.is_file() or out.stat().st_size == 0:
            reason = err.decode("utf-8", "replace").strip().splitlines()
            raise TutorError(t("pdf.failed", path=path, browser=browser, code=child.returncode,
                                   reason=reason[-1] if reason else "-"))
        return out.read_bytes()


def _stop_on_hangup() -> dict[int, Any]:
    """SIGTERM and SIGHUP (``kill``, a closed terminal) stop the print as Ctrl-C does: ``KeyboardInterrupt`` is
    raised where attn-tutor waits, so Chromium's process group (a session of its own, which the terminal's
    signals do not reach) is killed on the way out.  Only in the main thread (where Python runs signal
    handlers); returns the handlers replaced."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return {}

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    return {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGHUP)}


def _restore(previous: Mapping[int, Any]) -> None:
    for s, handler in previous.items():
        signal.signal(s, handler)


def _kill(child: subprocess.Popen[bytes]) -> None:
    """Kill the process group ``child`` leads (it was started in a session of its own), then reap it."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    child.wait()
