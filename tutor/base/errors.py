"""One exception type per failure; the CLI turns each into a one-line message.

Every error's ``str()`` is already a complete, user-facing sentence (worded in
:mod:`tutor.base.messages`), so the CLI only has to print it and pick the exit code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .messages import Text


class TutorError(Exception):
    """Root of every error attn-tutor reports to a user (exit code 2)."""

    exit_code = 2


@dataclass(frozen=True)
class Problem:
    """One problem found in a user-written file.

    ``line`` and ``column`` are 1-based; ``None`` when the problem has no single
    place (a missing field is reported at the mapping that lacks it).
    """

    file: str
    line: int | None
    column: int | None
    field: str
    message: Text
    hint: Text = ""

    def location(self) -> str:
        parts = [self.file]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)

    def text(self) -> str:
        """The message and its hint, one sentence in the language of the run: ``message (hint)``."""
        from .messages import t

        return t("problem.with_hint", message=self.message, hint=self.hint) if self.hint else str(self.message)

    def __str__(self) -> str:
        """``file:line:col: field: message (hint)``: where, as compilers write it, then :meth:`text`."""
        return f"{self.location()}: {self.field}: {self.text()}" if self.field else f"{self.location()}: {self.text()}"


class ExerciseError(TutorError):
    """An exercise (or solution) file is unusable; holds every problem found."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class NotFoundError(TutorError):
    """An exercise id or path names nothing."""


class ShapeError(TutorError, ValueError):
    """Matrix shapes do not chain (e.g. ``[3×4]·[3×2]``)."""


class AnswerError(TutorError, ValueError):
    """A typed answer is not in the answer grammar, or has the wrong shape."""


class InputClosedError(TutorError):
    """Standard input is closed (``<&-``): there is nothing to read answers from."""


class StoreError(TutorError):
    """The progress store cannot be opened or written (corrupt, foreign, locked)."""


class EngineMismatchError(TutorError):
    """The exact engine and the NumPy core disagree; no solution is printed."""


def where_raised(err: BaseException) -> str:
    """Where ``err`` was raised inside the package, from the package's folder down (``tutor/audit/batch.py:240``),
    for the one line of an internal error; ``"?"`` when no frame of its traceback is the package's."""
    import traceback
    from pathlib import Path

    frames = [f for f in traceback.extract_tb(err.__traceback__) if "tutor" in Path(f.filename).parts]
    if not frames:
        return "?"
    parts = Path(frames[-1].filename).parts
    inside = parts[len(parts) - 1 - parts[::-1].index("tutor"):]  # from the package folder down
    return f"{'/'.join(inside)}:{frames[-1].lineno}"
