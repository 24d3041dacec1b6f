"""The command line: a thin Typer layer over the library.

The only package that imports typer: ``app`` and :func:`main` here, the
commands in one module per area (``explain``, ``practice``, ``author``).
Commands import what they compute with inside their bodies, so ``attn-tutor --help`` and ``attn-tutor list`` never
import sympy or numpy.  Every :class:`tutor.errors.TutorError` becomes a
one-line ``error: ...`` on stderr and exit code 2, and every exit code is
decided, in :func:`main` only (1 means only "the solution checked is wrong").
"""

from __future__ import annotations

import codecs
import os
import sys
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Annotated, TextIO

import typer

from ..errors import TutorError
from ..messages import t
from ..render import MIN_WIDTH
from ..textsafe import shown, shown_stream

app = typer.Typer(
    help=t("cli.help"),
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def console(stderr: bool = False):  # -> tutor.render.console.SafeConsole
    """The console commands print to; colour and encoding come from the environment.

    Its width is the terminal's (or ``COLUMNS``), never under
    :data:`tutor.render.MIN_WIDTH`; markup is off (text from exercise files,
    token labels and titles, is shown as written, never as rich markup); the
    text it renders never holds a raw control character.
    """
    from ..render.console import make_console

    return make_console(stderr=stderr)


def write(text: str) -> None:
    """Write lines for people on stdout verbatim (no wrapping, no markup), control characters escaped."""
    sys.stdout.write(shown(text if text.endswith("\n") else text + "\n", keep="\n\t"))


def write_document(text: str) -> None:
    """Write a machine-readable document (JSON, Markdown, HTML, YAML) on stdout.

    Control characters are escaped (a document is text: newlines and tabs
    stay).  On a stream that is not UTF-8 (``PYTHONIOENCODING=ascii``,
    ``LC_ALL=C``) the document is written as UTF-8 bytes, as a file of that
    format is read; JSON is ASCII anyway.
    """
    text = shown(text if text.endswith("\n") else text + "\n", keep="\n\t")
    document = getattr(sys.stdout, "write_document", None)  # the guarded stdout of main(); a test's capture has none
    if document is not None:
        document(text)
    else:
        sys.stdout.write(text)


def warn(text: str) -> None:
    """Write ``text`` on stderr, one line per line, control characters escaped (a file name may hold any)."""
    for line in text.split("\n"):
        sys.stderr.write(shown(line, keep="\t") + "\n")


ExerciseArg = Annotated[str, typer.Argument(help="A bundled exercise id or a YAML file path.")]


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"attn-tutor {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[bool, typer.Option("--version", help=t("cli.opt.version"), callback=_version, is_eager=True)] = False,
) -> None:
    """Options of attn-tutor itself (before the command)."""


def check_head(head: int | None, num_heads: int) -> None:
    """A usage error (exit 2) when ``--head`` names a head the exercise does not have."""
    if head is not None and head >= num_heads:
        key = "explain.one_head" if num_heads == 1 else "explain.no_head"
        raise typer.BadParameter(t(key, head=head, last=num_heads - 1), param_hint="--head")

# Options shared by several commands: defined once.


class Format(str, Enum):
    """`--format` of list, check, stats and validate: for people, or JSON for scripts and CI."""

    rich = "rich"
    json = "json"


FormatOpt = Annotated[Format, typer.Option("--format", help=t("cli.opt.format"))]
ExercisesOpt = Annotated[
    list[Path] | None,
    typer.Option("--exercises", help=t("cli.opt.exercises"), exists=True, file_okay=False, dir_okay=True,
                 show_default=False),
]

#: Exit codes.  1 is the verdict "the solution is wrong" of ``check`` and
#: nothing else: it is returned only for :class:`SolutionWrong`, and every
#: other way out that would give 1 (an uncaught exception, ``sys.exit(1)``,
#: a click abort) is mapped to 2 or 3 by :func:`main`.
EXIT_OK, EXIT_WRONG, EXIT_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


class SolutionWrong(Exception):
    """Raised by ``check`` (only) when the solution it audited is wrong: exit code 1.

    Neither a :class:`TutorError` (exit 2) nor a ``SystemExit``: :func:`main`
    is the one place that turns it into :data:`EXIT_WRONG`.
    """


# Commands live in one module per area and register themselves on `app`.
# The order of these imports is the order of the commands in `attn-tutor --help`.
# isort: off
from . import explain as _explain  # noqa: F401  explain, list
from . import practice as _practice  # noqa: F401  practice, stats
from . import check as _check  # noqa: F401  check
from . import author as _author  # noqa: F401  validate, new, schema
# isort: on


class OutputError(TutorError):
    """Standard output cannot be written (a full disk, a closed file)."""


def _transliterate(err: UnicodeError) -> tuple[str, int]:
    """Codec error handler: a character the stream cannot encode, in ASCII (``√`` -> ``sqrt``, else ``\\u2026``)."""
    if not isinstance(err, UnicodeEncodeError):
        raise err
    from ..render.text import asciify

    return asciify(err.object[err.start:err.end]), err.end


codecs.register_error("attn-tutor-ascii", _transliterate)


def _is_utf(encoding: str | None) -> bool:
    try:
        return codecs.lookup(encoding or "utf-8").name.startswith("utf")
    except LookupError:
        return False


class _GuardedStream:
    """A standard stream as the commands see it: never raw control characters, never an encoding crash,
    never a silent loss of output.

    - Text is escaped by :func:`tutor.textsafe.shown_stream` (only colour
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
      probes its stream with an empty write), so :func:`main` always reports
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
        self._utf = _is_utf(self.encoding)

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
            self._silence()
            self._fail(str(err.strerror or err))
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

    def write_document(self, text: str) -> None:
        """Write ``text`` (already escaped) as it is: UTF-8 bytes when the stream has another encoding."""
        buffer = getattr(self._stream, "buffer", None)
        if self._utf or buffer is None:
            self.write(text)
            return

        def put() -> None:
            self._stream.flush()  # type: ignore[union-attr]
            buffer.write(text.encode("utf-8", "backslashreplace"))
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


_GuardedStdout = _GuardedStream  # the name of its first version


def _plug_closed_descriptors() -> None:
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


def _clamp_columns() -> str | None:
    """``COLUMNS`` below :data:`MIN_WIDTH` (``COLUMNS=0``) raised to it, for every console (typer's help too).

    Returns the value to restore afterwards.
    """
    value = os.environ.get("COLUMNS")
    if value is not None and value.strip().isdigit() and int(value) < MIN_WIDTH:
        os.environ["COLUMNS"] = str(MIN_WIDTH)
    return value


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code: 0 done, 1 ``check`` found the solution
    wrong, 2 a usage error or unusable input, 3 attn-tutor itself failed (a bug).

    Every outcome passes through here (Typer runs with ``standalone_mode=False``):
    usage errors are shown as Typer shows them, every :class:`TutorError`
    becomes ``error: ...`` lines on stderr, any other exception one
    ``internal error`` line naming its type and place (the traceback only with
    ``ATTN_TUTOR_DEBUG=1``), never a traceback and never exit code 1.  With
    ``--format json`` on the command line, an error also prints one JSON
    document on stdout (:func:`error_document`).  Output goes through
    :class:`_GuardedStream` (stdout and stderr): text is escaped, encodable,
    and an output that cannot be written is one error line and exit 2.
    """
    args = sys.argv[1:] if argv is None else list(argv)
    _plug_closed_descriptors()
    real_out, real_err = sys.stdout, sys.stderr
    out = _GuardedStream(real_out, required=True)
    sys.stdout, sys.stderr = out, _GuardedStream(real_err, required=False)  # type: ignore[assignment]
    columns = _clamp_columns()
    try:
        code = _run(args)
        if out.failure is not None and code != EXIT_INPUT:  # also when a library swallowed the OutputError
            sys.stderr.write(t("cli.error", message=t("cli.output_failed", reason=out.failure)) + "\n")
            code = EXIT_INPUT
        return code
    finally:
        sys.stdout, sys.stderr = real_out, real_err
        if columns is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = columns


def _run(args: list[str]) -> int:
    """Run the app on ``args`` with the guarded streams in place; every way out becomes an exit code."""
    try:
        try:
            result = app(args=args, prog_name="attn-tutor", standalone_mode=False)
        finally:
            sys.stdout.flush()  # inside the try: a failing last flush is reported like any write
    except SolutionWrong:
        return EXIT_WRONG
    except SystemExit as done:  # sys.exit() below a command (click exits 1 on a broken pipe)
        return _not_wrong(done.code)
    except OutputError as err:  # stdout is the problem: no JSON document can follow on it
        sys.stderr.write(t("cli.error", message=str(err)) + "\n")
        return EXIT_INPUT
    except TutorError as err:
        return _fail(args, "input", err.exit_code, str(err), getattr(err, "problems", None))
    except KeyboardInterrupt:
        sys.stderr.write(t("cli.interrupted") + "\n")
        return 130
    except typer.Abort:  # click's answer to end of input inside a prompt
        return _fail(args, "input", EXIT_INPUT, t("cli.aborted"))
    except Exception as err:  # noqa: BLE001 - the one place every failure is reported
        if _is_usage_error(err):
            _show_usage_error(err)
            return _fail(args, "usage", EXIT_INPUT, err.format_message(), echo=False)  # type: ignore[attr-defined]
        return _internal_error(args, err)
    return _not_wrong(result)


def _not_wrong(code: object) -> int:
    """An exit code from ``typer.Exit``/``sys.exit``, with 1 (reserved for :class:`SolutionWrong`) made 2."""
    if code is None:
        return EXIT_OK
    if not isinstance(code, int) or isinstance(code, bool) or code == EXIT_WRONG:
        return EXIT_INPUT
    return code


def _is_usage_error(err: BaseException) -> bool:
    """True for click's usage errors and the like (``BadParameter``, ``NoSuchOption``), by their interface."""
    return callable(getattr(err, "format_message", None)) and isinstance(getattr(err, "exit_code", None), int)


def _show_usage_error(err: Exception) -> None:
    """Print a usage error on stderr exactly as Typer does in its standalone mode."""
    from typer import core

    if getattr(core, "HAS_RICH", False) and getattr(app, "rich_markup_mode", None) is not None:
        from typer import rich_utils

        rich_utils.rich_format_error(err)  # type: ignore[arg-type]
    else:
        err.show()  # type: ignore[attr-defined]


def _fail(args: list[str], kind: str, code: int, message: str, problems: object = None, *, echo: bool = True) -> int:
    """Report an error: ``error:`` lines on stderr (unless already shown), the JSON document with --format json."""
    if echo:
        for line in message.splitlines() or [message]:
            sys.stderr.write(t("cli.error", message=shown(line, keep="\t")) + "\n")
    if wants_json(args):
        try:
            write(error_document(kind, code, message, problems))
        except (TutorError, OSError):  # stdout itself is the problem: stderr has said it
            pass
    return code


def _internal_error(args: list[str], err: Exception) -> int:
    """An exception attn-tutor did not expect: one line naming its type and where it was raised."""
    import traceback

    frames = [f for f in traceback.extract_tb(err.__traceback__) if "tutor" in Path(f.filename).parts]
    where = "?"
    if frames:
        parts = Path(frames[-1].filename).parts
        inside = parts[len(parts) - 1 - parts[::-1].index("tutor"):]  # from the package folder down
        where = f"{'/'.join(inside)}:{frames[-1].lineno}"
    if os.environ.get("ATTN_TUTOR_DEBUG"):
        traceback.print_exception(err, file=sys.stderr)
    message = t("cli.internal", kind=type(err).__name__, where=where)
    sys.stderr.write(message + "\n")
    return _fail(args, "internal", EXIT_INTERNAL, message, echo=False)


def wants_json(args: list[str]) -> bool:
    """True when the command line asks for ``--format json`` (``--format json`` or ``--format=json``)."""
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg == "--format=json" or (arg == "--format" and args[i + 1:i + 2] == ["json"]):
            return True
    return False


def error_document(kind: str, code: int, message: str, problems: object = None) -> str:
    """The JSON document a ``--format json`` command prints on stdout when it fails.

    ``{"error": kind, "exit_code": code, "errors": [...]}``: ``kind`` is
    ``"input"`` (an unusable file, an unknown exercise, a damaged store),
    ``"usage"`` (a bad option or argument) or ``"internal"`` (a bug in
    attn-tutor); each error has ``file``, ``line``, ``column`` (``null`` when
    it has no place), ``field``, ``message``, ``hint``, ``severity``
    (``"error"``) and ``text`` (the whole line as stderr shows it after
    ``error:``) - the shape of ``validate --format json``'s problems.  A
    command's normal JSON output never has an ``error`` key.
    """
    import json

    from .author import _problem_dict

    if isinstance(problems, (list, tuple)) and problems:
        errors = [_problem_dict(p, "error") for p in problems]
    else:
        errors = [{"file": None, "line": None, "column": None, "field": "", "message": line, "hint": "",
                   "severity": "error", "text": line} for line in (message.splitlines() or [message])]
    return json.dumps({"error": kind, "exit_code": code, "errors": errors}, indent=1)


def run() -> None:  # pragma: no cover - the console script
    sys.exit(main())
