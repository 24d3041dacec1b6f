"""Reading what a learner types: the one line reader of every drill, and Ctrl-C at any moment.

Every loop that asks (a practice session, the online softmax's, the
interview drills, the mock interview) reads its answers with :class:`Lines`:
from a terminal that is ``sys.stdin`` with ``input()`` (line editing and
history), from anything else with ``stream.readline()``, each line then
echoed after its prompt so that a transcript reads as typed; undecodable
bytes, piped or typed at a terminal whose encoding cannot hold them, become
U+FFFD (then an unreadable answer), never a crash.  The console it writes prompts to and the echo are passed in (rich's
``Prompt(stream=...)``); nothing here renders.

Ctrl-C: :func:`ctrl_c_interrupts` makes it raise :class:`KeyboardInterrupt`
however the process was started (a background job of a non-interactive
shell starts with SIGINT ignored), and :func:`deferred_interrupt` holds it
while an answer is written to the store, so an answer is saved and noted
together or not at all.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TextIO

from ..base.errors import InputClosedError
from ..base.messages import t

if TYPE_CHECKING:
    from rich.console import Console


def answer_stream(stream: TextIO | None) -> TextIO:
    """``stream`` as the stream answers are read from; :class:`InputClosedError` when it is closed (``<&-``)."""
    if stream is None or getattr(stream, "closed", False):
        raise InputClosedError(t("practice.stdin_closed"))
    return stream


@contextmanager
def ctrl_c_interrupts() -> Iterator[None]:
    """Ctrl-C raises :class:`KeyboardInterrupt` inside the block, whatever SIGINT's disposition was.

    A process started as a background job of a non-interactive shell has
    SIGINT ignored, so Python never installed its handler and Ctrl-C at the
    prompt would do nothing.  The previous handler is restored on the way
    out.  Outside the main thread (where no handler can be set) this does
    nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if previous is not None:  # None: a handler set outside Python, which cannot be put back from here
            signal.signal(signal.SIGINT, previous)


@contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Ctrl-C inside the block takes effect as it ends (:class:`KeyboardInterrupt` then): a write to the
    store and the note that it was written happen both or neither, so no answer is lost or saved twice.

    Outside the main thread (where no handler can be set) this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)
    if caught:
        raise KeyboardInterrupt


class Lines:
    """Where answers come from: :meth:`read` is the next line after a prompt, or ``None`` at the end of input.

    ``console`` shows the prompt; ``echo(prompt, line)`` shows a line read
    from anything but the terminal after its prompt.  Ctrl-C raises
    :class:`KeyboardInterrupt` to the caller.
    """

    def __init__(self, stream: TextIO, console: Console, echo: Callable[[str, str], None]):
        self.stream, self.console, self.echo = stream, console, echo
        self.interactive = stream is sys.stdin and stream.isatty()
        # Undecodable bytes become U+FFFD (then an unreadable answer), never a crash: piped or typed at a
        # terminal alike, since input() decodes a terminal's line with the stream's encoding and errors too
        # (a `√` typed where the stream's encoding is ASCII).
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="replace")
            except (ValueError, OSError):  # pragma: no cover - a stream that cannot change
                pass
        if self.interactive:
            try:  # input() gets line editing and history only once readline is loaded
                import readline  # noqa: F401
            except ImportError:  # pragma: no cover - Windows without pyreadline
                pass

    def read(self, prompt: str) -> str | None:
        """The next line (without its line ending) after showing ``prompt``; ``None`` at the end of input."""
        console = self.console
        if self.interactive:
            from rich.text import Text

            try:
                return console.input(Text(prompt))
            except EOFError:
                console.print()
                return None
        console.print(prompt, end="", markup=False, highlight=False)
        console.file.flush()
        line = self.stream.readline()
        if line == "":
            console.print()
            return None
        line = line.rstrip("\r\n")
        self.echo(prompt, line)
        return line
