"""What every command shares: the run's environment, output helpers, shared options, exit codes.

The command modules (``explain``, ``practice``, ``check``, ``author``) import
from here and never from :mod:`tutor.cli` itself, which imports them to
register their functions on the Typer app: dependencies point one way,
``tutor.cli -> command modules -> common``.  Nothing here imports sympy or
numpy (``attn-tutor --help`` and ``list`` must stay fast).

Every command reads the run's :class:`tutor.base.env.Env` from its click
context (:func:`environment`; :func:`tutor.cli.main` puts it there) and
passes on what the library needs: the packs (:func:`folders`), the progress
store's file (:func:`store_path`), a console (:func:`console`), standard
input (``Env.stdin``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from enum import Enum
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup

from ..base.env import Env
from ..base.messages import language, t
from ..base.textsafe import shown

if TYPE_CHECKING:
    from ..render.console import SafeConsole

#: Exit codes.  1 is the verdict "the solution is wrong" of ``check`` and
#: nothing else: it is returned only for :class:`SolutionWrong`, and every
#: other way out that would give 1 (an uncaught exception, ``sys.exit(1)``,
#: a click abort) is mapped to 2 or 3 by :func:`tutor.cli.main`.
EXIT_OK, EXIT_WRONG, EXIT_INPUT, EXIT_INTERNAL = 0, 1, 2, 3
#: Ctrl-C ended the command (128 + SIGINT, as a shell reports it); a practice session ends with 0.
EXIT_INTERRUPTED = 130

#: The largest ``--seed`` (a signed 64-bit integer, 19 digits): a larger one is a usage error of ``--seed``
#: itself, never a file's id too long to write (issue 20, E: a 4,001-digit seed was blamed on ``--id``).
MAX_SEED = 2**63 - 1


class SolutionWrong(Exception):
    """Raised by ``check`` when the solution it audited is wrong, and by ``code check`` when a case failed: exit code 1.

    Neither a :class:`tutor.base.errors.TutorError` (exit 2) nor a ``SystemExit``:
    :func:`tutor.cli.main` is the one place that turns it into :data:`EXIT_WRONG`.
    """


# --- output ------------------------------------------------------------------------------


# --- the environment of the run ----------------------------------------------------------


def environment(ctx: typer.Context) -> Env:
    """The :class:`Env` of this run: the object :func:`tutor.cli.main` gave the click context.

    Raises ``RuntimeError`` when the command was run without one (not through ``main``).
    """
    env = ctx.find_object(Env)
    if env is None:
        raise RuntimeError("attn-tutor's commands run through tutor.cli.main, which gives them an Env")
    return env


def folders(env: Env, exercises: Sequence[Path] | None) -> list[Path]:
    """The exercise packs of a command: its ``--exercises`` folders, then ``ATTN_TUTOR_PATH``'s (``env.packs``)."""
    return [*(exercises or ()), *env.packs]


def store_path(env: Env) -> Path:
    """The progress store's file: ``progress.sqlite3`` in the Env's data folder (:meth:`Env.data_dir`)."""
    from ..store.files import default_path

    return default_path(env.data_dir())


@contextmanager
def help_console(env: Env | None) -> Iterator[None]:
    """Inside the block, typer's help is printed on a console of ``env`` (its help width, else its
    width, and its variables), not of the process's environment (``None``: the process's), with
    typer's own words (``Options``, ``[default: …]``) in the language of the run.

    typer builds its help console itself (``typer.rich_utils._get_rich_console``, with its theme
    and colours) from the ``Console`` it imported from rich; for the block that name makes the
    same console with the Env's width and variables, and forced to be a terminal by typer's own
    rule (``GITHUB_ACTIONS``, ``FORCE_COLOR``, ``PY_COLORS``; ``_TYPER_FORCE_DISABLE_TERMINAL``)
    read from the Env's variables, where typer reads the process's once, at import.  Used by
    :class:`HelpCommand` and :class:`HelpGroup` around their help, so typer's rich module is
    imported only when help is shown.
    """
    from typer import rich_utils

    from ..render.console import line_breaks

    line_breaks()
    words = {name: getattr(rich_utils, name) for name in _TYPER_WORDS}
    for name, key in _TYPER_WORDS.items():  # typer's own words, in the language of the run
        setattr(rich_utils, name, t(key))
    try:
        if env is None:
            yield
        else:
            with _pinned_console(rich_utils, env):
                yield
    finally:
        for name, word in words.items():
            setattr(rich_utils, name, word)


#: typer's own words in its help (``typer.rich_utils``' constants) and the keys that say them.
_TYPER_WORDS = {"DEFAULT_STRING": "cli.help.default", "REQUIRED_LONG_STRING": "cli.help.required",
                "ENVVAR_STRING": "cli.help.env_var", "DEPRECATED_STRING": "cli.help.deprecated",
                "ARGUMENTS_PANEL_TITLE": "cli.help.arguments", "OPTIONS_PANEL_TITLE": "cli.help.options",
                "COMMANDS_PANEL_TITLE": "cli.help.commands"}


@contextmanager
def _pinned_console(rich_utils: Any, env: Env) -> Iterator[None]:
    """typer's help console made with ``env``'s width and variables inside the block (:func:`help_console`)."""
    made = rich_utils.Console
    width = env.help_width if env.help_width is not None else env.width
    variables = env.environ
    forced = True if any(variables.get(name) for name in ("GITHUB_ACTIONS", "FORCE_COLOR", "PY_COLORS")) else None
    if variables.get("_TYPER_FORCE_DISABLE_TERMINAL"):
        forced = False

    def pinned(**options: Any) -> Any:
        return made(**{**options, "width": width if width is not None else options.get("width"),
                       "force_terminal": forced, "_environ": variables})

    rich_utils.Console = pinned
    try:
        yield
    finally:
        rich_utils.Console = made


def translated_help(text: str | None) -> str | None:
    """A help text of the command line (a paragraph or several, each a ``cli.*`` key's English, fixed when
    the commands were declared) in the language of the run; a paragraph that is no key's stays as it is."""
    if text is None or language() == "en":
        return text
    return "\n\n".join(t(_help_keys()[p]) if p in _help_keys() else p for p in text.split("\n\n"))


@cache
def _help_keys() -> dict[str, str]:
    """The English of every ``cli.*`` key, to its key."""
    from ..base.messages import EN

    return {text: key for key, text in EN.items() if key.startswith("cli.")}


def translate_help(cmd: Any) -> None:
    """Put ``cmd``'s help, its short help and its parameters' help (its subcommands' too, for a group) in
    the language of the run (:func:`translated_help`)."""
    cmd.help = translated_help(cmd.help)
    cmd.short_help = translated_help(getattr(cmd, "short_help", None))
    for param in cmd.params:
        if getattr(param, "help", None):
            param.help = translated_help(param.help)
    for sub in getattr(cmd, "commands", {}).values():
        translate_help(sub)


def _usage(cmd: Any, ctx: Any, formatter: Any) -> None:
    """The usage line, its ``Usage:`` in the language of the run."""
    formatter.write_usage(ctx.command_path, " ".join(cmd.collect_usage_pieces(ctx)), prefix=t("cli.help.usage"))


@contextmanager
def rich_escaped(cmd: Any, ctx: Any) -> Iterator[None]:
    """Inside the block, the help texts of ``cmd`` (its help, short help and epilog, its parameters' help, and
    its subcommands' help for a group) escaped for rich markup, restored after.

    typer shows help in ``rich_markup_mode="rich"`` (``rich.text.Text.from_markup``), which takes
    ``[heads·d_k, d_model]`` for a style tag and drops it; the help is written as plain text, so every
    ``[...]`` in it is escaped (``rich.markup.escape``) while help is shown, in every language.
    """
    from rich.markup import escape

    saved: list[tuple[Any, str, str]] = []

    def escaped(obj: Any, *attrs: str) -> None:
        for attr in attrs:
            text = getattr(obj, attr, None)
            if isinstance(text, str) and text:
                saved.append((obj, attr, text))
                setattr(obj, attr, escape(text))

    escaped(cmd, "help", "short_help", "epilog")
    for param in cmd.get_params(ctx):
        escaped(param, "help")
    for sub in getattr(cmd, "commands", {}).values():
        escaped(sub, "help", "short_help")
    try:
        yield
    finally:
        for obj, attr, text in reversed(saved):
            setattr(obj, attr, text)


class HelpCommand(TyperCommand):
    """A command whose help is printed at the run's width and colours and in its language (:func:`help_console`)."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        with help_console(ctx.find_object(Env)), rich_escaped(self, ctx):
            super().format_help(ctx, formatter)

    def format_usage(self, ctx: Any, formatter: Any) -> None:
        _usage(self, ctx, formatter)


class HelpGroup(TyperGroup):
    """A group of commands whose help is printed at the run's width and colours and in its language
    (:func:`help_console`)."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        with help_console(ctx.find_object(Env)), rich_escaped(self, ctx):
            super().format_help(ctx, formatter)

    def format_usage(self, ctx: Any, formatter: Any) -> None:
        _usage(self, ctx, formatter)


def console(env: Env, stderr: bool = False) -> SafeConsole:
    """The console a command prints to: width, colour and terminal from ``env``.

    Its width is ``env.width`` (``COLUMNS``) or the terminal's, never under
    :data:`tutor.render.MIN_WIDTH`; markup is off (text from exercise files,
    token labels and titles, is shown as written, never as rich markup); the
    text it renders never holds a raw control character.
    """
    from ..render.console import make_console

    return make_console(env, stderr=stderr)


def write(text: str) -> None:
    """Write lines for people on stdout verbatim (no wrapping, no markup), control characters escaped."""
    sys.stdout.write(shown(text if text.endswith("\n") else text + "\n", keep="\n\t"))


def write_document(text: str, *, bom: bool = False) -> None:
    """Write a machine-readable document (JSON, Markdown, HTML, YAML) on stdout.

    Control characters are escaped (a document is text: newlines and tabs
    stay).  On a stream that is not UTF-8 (``PYTHONIOENCODING=ascii``,
    ``LC_ALL=C``) the document is written as UTF-8 bytes, as a file of that
    format is read; JSON is ASCII anyway.  ``bom``: a byte order mark first
    (U+FEFF, the bytes EF BB BF), by which Excel knows a CSV is UTF-8.
    """
    text = shown(text if text.endswith("\n") else text + "\n", keep="\n\t")
    document = getattr(sys.stdout, "write_document", None)  # the guarded stdout of main(); a test's capture has none
    if document is not None:
        document(text, bom=bom)
    else:
        sys.stdout.write(("\ufeff" if bom else "") + text)


def write_json(obj: object) -> None:
    """Write ``obj`` as a JSON document on stdout (:func:`tutor.base.jsontext.document`: ASCII, safe on any
    stream); json is imported here, not when a command module is (``--help`` does not pay for it)."""
    from ..base.jsontext import document

    write_document(document(obj))


def warn(text: str) -> None:
    """Write ``text`` on stderr, one line per line, control characters escaped (a file name may hold any)."""
    for line in text.split("\n"):
        sys.stderr.write(shown(line, keep="\t") + "\n")


# --- options shared by several commands: defined once -------------------------------------


class Format(str, Enum):
    """`--format` of list, check, stats and validate: for people, or JSON for scripts and CI."""

    rich = "rich"
    json = "json"


ExerciseArg = Annotated[str, typer.Argument(help=t("cli.opt.exercise"))]
FormatOpt = Annotated[Format, typer.Option("--format", help=t("cli.opt.format"))]
ExercisesOpt = Annotated[
    list[Path] | None,
    typer.Option("--exercises", help=t("cli.opt.exercises"), exists=True, file_okay=False, dir_okay=True,
                 show_default=False),
]


#: ``--head N``: heads are numbered from 1 wherever a learner reads or types them (JSON keeps 0-based indices).
HeadOpt = Annotated[int | None, typer.Option("--head", help=t("cli.practice.head.one_based"), min=1, show_default=False)]
#: ``--tolerance T`` of practice and check: every decimal judged within ± T instead of its rounding.
ToleranceOpt = Annotated[float | None, typer.Option("--tolerance", help=t("cli.practice.tolerance"), show_default=False)]


def head_index(head: int | None) -> int | None:
    """``--head`` (1-based, as a learner counts heads) as the 0-based index the library uses."""
    return None if head is None else head - 1


def check_head(head: int | None, num_heads: int) -> None:
    """A usage error (exit 2) when ``--head`` (1-based) names a head the exercise does not have."""
    if head is not None and head > num_heads:
        from ..practice.plan import head_error

        raise typer.BadParameter(head_error(head - 1, num_heads), param_hint="--head")


def check_tolerance(tolerance: float | None) -> None:
    """A usage error for a ``--tolerance`` that is not a number above 0 (and at most 1000000)."""
    if tolerance is not None and not 0 < tolerance <= 1e6:  # also refuses nan
        raise typer.BadParameter(t("practice.bad_tolerance", found=tolerance), param_hint="--tolerance")
