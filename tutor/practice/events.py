"""What the learner does, as the drill's events: a typed line (an answer or a command), the end of input, Ctrl-C."""

from __future__ import annotations

from dataclasses import dataclass

from ..base.halfwidth import halfwidth

COMMANDS = ("hint", "shape", "show", "skip", "quit", "help")


@dataclass(frozen=True)
class Answer:
    """A typed line that is not a command (possibly empty: it ends row-by-row input)."""

    text: str


@dataclass(frozen=True)
class Command:
    """One of :data:`COMMANDS`."""

    name: str


@dataclass(frozen=True)
class EndOfInput:
    """The input stream ended (Ctrl-D, or the end of a piped script)."""


@dataclass(frozen=True)
class Interrupt:
    """Ctrl-C."""


Event = Answer | Command | EndOfInput | Interrupt


def read_event(line: str) -> Answer | Command:
    """A typed line as an event: a command word (any case, surrounding blanks ignored) or an answer.

    >>> read_event("  Hint "), read_event("1 1; 2 2")
    (Command(name='hint'), Answer(text='1 1; 2 2'))
    """
    word = halfwidth(line).strip().lower()  # ｈｉｎｔ typed with a Chinese input method is hint
    return Command(word) if word in COMMANDS else Answer(line.rstrip("\r\n"))

