"""The standard streams as the commands see them: escaped, encodable, and never a silent loss of output.

:func:`tutor.cli.main` wraps stdout and stderr in :class:`GuardedStream` for
the duration of a run, after :func:`plug_closed_descriptors` has made sure a
closed fd 0, 1 or 2 cannot be taken by a file opened later.
"""

from __future__ import annotations

import codecs
import os
import re
from collections.abc import Callable
from typing import TextIO

from ..base.ascii import is_utf
from ..base.errors import TutorError
from ..base.messages import t
from ..base.textsafe import shown_stream


class OutputError(TutorError):
    """Standard output cannot be written (a full disk, a closed file)."""


def _transliterate(err: UnicodeError) -> tuple[str, int]:
    """Codec error handler: a character the stream cannot encode, in ASCII (``√`` -> ``sqrt``, else ``\\u2026``)."""
    if not isinstance(err, UnicodeEncodeError):
        raise err
    from ..base.ascii import asciify

    root = _ROOT_OF.match(err.object, err.start)  # √d_model -> sqrt(d_model), as asciify writes it
    if root is not None:
        times = "*" if err.start and err.object[err.start - 1].isdigit() else ""  # 2√2 -> 2*sqrt(2)
        return f"{times}sqrt({root.group(1)})", root.end()
    return asciify(err.object[err.start:err.end]), err.end


_ROOT_OF = re.compile(r"√([A-Za-z0-9_]+)")


codecs.register_error("attn-tutor-ascii", _transliterate)


class GuardedStream:
    """A standard stream as the commands see it: never raw control characters, never an encoding crash,
    never a silent loss of output.

    - Text is escaped by :func:`tutor.base.textsafe.shown_stream` (only colour
      sequences pass), the last line of defence behind the renderers.
    - On a stream that is not UTF-8, characters it cannot encode are
      transliterated (``…`` -> ``...``, ``√`` -> ``sqrt``) or written as
      ``\\uXXXX``; :meth:`write_document` writes UTF-8 bytes instead.
    - When the reader of a pipe quits (``attn-tutor check … | head -1``),
      later writes are dropped and the command runs to its end, so its exit
      code still says what it found (``check``: 1 when a step is wrong), not
      what happened to the pipe.  Any other write error (``> /dev/full``) or
      a closed stream (``>&-``) is a :class:`OutputError`, and stays recorded
      in :attr:`failure` even where a library swallows the exception (click
      probes its stream with an empty write), so :func:`tutor.cli.main` always reports
      it: one ``error:`` line and exit 2.  Either way fd 1 is pointed at
      /dev/null so the interpreter's last flush cannot fail again.
    - ``required=False`` (stderr): writes that fail are dropped; there is
      nowhere left to report them, and the exit code still tells.
    """

    def __init__(self, stream: TextIO | None, *, required: bool = True):
        self._stream = stream
        self.required = required
        self.broken = False
        self.failure: str | None = None
        self.encoding = getattr(stream, "encoding", None) or "utf-8"
        self.errors = getattr(stream, "errors", None) or "strict"
        self._utf = is_utf(self.encoding)

    def _silence(self) -> None:
        self.broken = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())  # type: ignore[union-attr]
            os.close(devnull)
        except (OSError, ValueError, AttributeError):  # not a real file (a test's capture)
            pass

    def _fail(self, reason: str) -> None:
        self.broken = True
        if self.required:
            self.failure = reason
            raise OutputError(t("cli.output_failed", reason=reason))

    def _guard(self, call: Callable[[], object]) -> None:
        if self.broken:
            return
        if self._stream is None:
            self._fail(t("cli.stdout_closed"))
            return
        try:
            call()
        except BrokenPipeError:
            self._silence()
        except OSError as err:
            from ..base.outfile import os_reason

            self._silence()
            self._fail(os_reason(err))  # ENOSPC (> /dev/full): the disk is full
        except ValueError:  # "I/O operation on closed file"
            self._fail(t("cli.stdout_closed"))

    def write(self, text: str) -> int:
        if not isinstance(text, str):  # as a text stream does (click probes with b"")
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if not text:  # nothing to write: never an error (click probes with "")
            return 0
        out = shown_stream(text)
        if not self._utf:
            out = out.encode(self.encoding, "attn-tutor-ascii").decode(self.encoding)
        self._guard(lambda: self._stream.write(out))  # type: ignore[union-attr]
        return len(text)

    def write_document(self, text: str, bom: bool = False) -> None:
        """Write ``text`` (already escaped) as it is: UTF-8 bytes when the stream has another encoding; ``bom``:
        after a byte order mark (U+FEFF, which :meth:`write` would escape as any character a terminal hides)."""
        buffer = getattr(self._stream, "buffer", None)
        if self._utf or buffer is None:
            if bom and self._utf:
                self._guard(lambda: self._stream.write("\ufeff"))  # type: ignore[union-attr]
            self.write(text)
            return

        def put() -> None:
            self._stream.flush()  # type: ignore[union-attr]
            buffer.write(("\ufeff" if bom else "").encode() + text.encode("utf-8", "backslashreplace"))
            buffer.flush()

        self._guard(put)

    def flush(self) -> None:
        if self._stream is not None:
            self._guard(self._stream.flush)

    def isatty(self) -> bool:
        return self._stream is not None and not self.broken and self._stream.isatty()

    def __getattr__(self, name: str) -> object:  # fileno, closed, ... as the real stream
        if name == "buffer" or self._stream is None:  # every write goes through write(): no way around it
            raise AttributeError(name)
        return getattr(self._stream, name)


def plug_closed_descriptors() -> None:
    """Point a closed fd 0, 1 or 2 at /dev/null, so that no file opened later takes its number.

    With ``>&-`` the next file opened (the progress store) would get fd 1,
    and anything written to "standard output" below Python would land in it.
    Python's ``sys.stdout`` stays ``None``: the command still knows it is closed.
    """
    for fd, mode in ((0, os.O_RDONLY), (1, os.O_WRONLY), (2, os.O_WRONLY)):
        try:
            os.fstat(fd)
        except OSError:
            try:
                null = os.open(os.devnull, mode)
                if null != fd:
                    os.dup2(null, fd)
                    os.close(null)
            except OSError:  # pragma: no cover - no /dev/null
                pass
