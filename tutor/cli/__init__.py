"""The command line: a thin Typer layer that parses options, calls the
library and prints; it builds the one environment object, turns every
error into one line and decides every exit code.

The only package that imports typer.  Each command is a plain function in a
module per area (``explain``, ``practice``, ``check``, ``author``), which
imports what it shares from :mod:`tutor.cli.common` and never from here; this
module builds ``app`` and registers the commands explicitly, in the order of
``attn-tutor --help`` (:data:`COMMANDS`).  Commands import what they compute
with inside their bodies, so ``attn-tutor --help`` and ``attn-tutor list``
never import sympy or numpy, and a run builds only the command it runs
(:class:`CommandLine`).  :func:`main` builds the run's
:class:`tutor.base.env.Env` (or is given one) and hands it to the commands
through the click context.  Every :class:`tutor.base.errors.TutorError` becomes
a one-line ``error: ...`` on stderr and exit code 2, and every exit code is
decided, in :func:`main` only (1 means only "the solution checked is wrong": ``check``, ``code check``).
"""

from __future__ import annotations

import copy
import re
import sys
from collections.abc import Callable
from dataclasses import replace
from functools import cache
from typing import Annotated, Any

import typer
from typer.core import TyperCommand

from ..base.env import Env, UnknownLanguage, language_code
from ..base.errors import TutorError
from ..base.messages import EN, LANGUAGES, language, t, use_language
from ..base.textsafe import lines, shown
from . import author, check, code, drill, explain, practice
from .common import (
    EXIT_INPUT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_WRONG,
    HelpCommand,
    HelpGroup,
    SolutionWrong,
    translate_help,
    translated_help,
    write,
)
from .streams import GuardedStream, OutputError, plug_closed_descriptors

__all__ = ["COMMANDS", "EXIT_INPUT", "EXIT_INTERNAL", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_WRONG", "SolutionWrong", "app", "main", "run"]

#: Every command: its name, the function that runs it (or, for a group of subcommands, its
#: Typer app), and the key of its help text, in the order ``attn-tutor --help`` lists them.
COMMANDS: tuple[tuple[str, Callable[..., Any], str], ...] = (
    ("explain", explain.explain, "cli.explain.help"),
    ("list", explain.list_, "cli.list.help"),
    ("practice", practice.practice, "cli.practice.help"),
    ("stats", practice.stats, "cli.stats.help"),
    ("validate", author.validate, "cli.validate.help"),
    ("new", author.new, "cli.new.help"),
    ("handouts", author.handouts, "cli.handouts.help"),  # issue 24: per-student variants
    ("schema", author.schema, "cli.schema.help"),
    ("check", check.check, "cli.check.help"),
    ("report", check.report, "cli.report.help"),  # issue 24: the class view of graded submissions and progress files
    ("drill", drill.app, "cli.drill.help"),  # a group: drill shapes|counts|masks|concepts|interview
    ("code", code.app, "cli.code.help"),  # a group: code list|start|check|show
)


#: The commands that grade answers by the rule of :mod:`tutor.answers.grading`.
GRADED = ("practice", "check")
#: The paragraph on its exit codes a command's help ends with, where they say more than 0 ok, 2 bad input.
EXIT_HELP = {"check": "cli.check.exit"}


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"attn-tutor {__version__}")
        raise typer.Exit()


def _options(
    version: Annotated[bool, typer.Option("--version", help=t("cli.opt.version"), callback=_version, is_eager=True)] = False,
) -> None:
    """Options of attn-tutor itself (before the command)."""


def _root(cls: type[HelpGroup]) -> typer.Typer:
    """attn-tutor's own Typer application, without its commands: its help and options (before the command)."""
    application = typer.Typer(
        help=t("cli.help"),
        add_completion=False,
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
        cls=cls,
    )
    application.callback()(_options)
    return application


def build_app() -> typer.Typer:
    """The Typer application: attn-tutor's own options and every command of :data:`COMMANDS`."""
    application = _root(HelpGroup)
    for name, function, help_key in COMMANDS:
        text = t(help_key)
        if name in GRADED:  # the one grading rule, said once, in the help of the commands that grade
            text += "\n\n" + t("cli.grading")
        if name in EXIT_HELP:
            text += "\n\n" + t(EXIT_HELP[name])
        if isinstance(function, typer.Typer):
            application.add_typer(function, name=name, help=text)
        else:
            application.command(name, help=text, cls=HelpCommand)(function)
    return application


app = build_app()


class CommandLine(HelpGroup):
    """The root of a run: attn-tutor's own options, and each command of :data:`app` built only when it
    is asked for (typer would build every command, parsing every signature, for any run).

    ``attn-tutor --help`` lists the commands from their registered help without building one.
    """

    _listing = False  # inside format_help: get_command gives the listing's summaries

    def list_commands(self, ctx: Any) -> list[str]:
        return [name for name, _, _ in COMMANDS]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.list_commands(ctx):
            return None
        if self._listing:  # the help's list of commands reads a command's name and help, nothing else
            return TyperCommand(cmd_name, help=translated_help(_registered_help(cmd_name)))
        if cmd_name not in self.commands:
            self.commands[cmd_name] = _tidied(_build(cmd_name))
        return self.commands[cmd_name]

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


def _registered_help(name: str) -> str:
    """The help text command ``name`` was registered with on :data:`app`."""
    for info in app.registered_commands:
        if info.name == name:
            return str(info.help)
    for group in app.registered_groups:
        if group.name == name:
            return str(group.help)
    raise KeyError(name)


def _build(name: str) -> Any:
    """The click command of :data:`app`'s command ``name``, as typer builds it (a group for ``drill``)."""
    import typer.main

    for info in app.registered_commands:
        if info.name == name:
            return typer.main.get_command_from_info(info, pretty_exceptions_short=app.pretty_exceptions_short,
                                                    rich_markup_mode=app.rich_markup_mode)
    for group in app.registered_groups:
        if group.name == name and group.typer_instance is not None:
            built = typer.main.get_command(group.typer_instance)
            built.name, built.help = name, group.help
            return built
    raise KeyError(name)


def _tidied(cmd: Any) -> Any:
    """``cmd`` with its help tidied: a flag (``--force``, ``--help``) shows no ``<bool>`` type, since it
    takes no value; and ``--help`` not given is ``False`` (typer would otherwise build a pydantic
    validator, importing pydantic, for the root's absent ``--help`` of every ``COMMAND --help``)."""
    ctx = type("HelpContext", (), {"help_option_names": ["-h", "--help"]})()
    helper = cmd.get_help_option(ctx)  # built once and kept by the command
    for param in list(cmd.params) + ([helper] if helper is not None else []):
        if getattr(param, "is_bool_flag", False) and param.metavar is None:
            param.metavar = ""
        elif param.metavar is None and getattr(param, "display_type_rich", None) is not None:
            shown_type = param.display_type_rich(None)  # "<int range>": the range is said beside it ([x>=1])
            if shown_type in ("<int range>", "<float range>"):
                param.metavar = shown_type.replace(" range", "")
    if helper is not None:
        helper.help = t("cli.opt.help")
        if helper.default is None:
            helper.default = False
    _with_language(cmd)
    translate_help(cmd)
    for sub in getattr(cmd, "commands", {}).values():  # a group's commands (drill, code)
        _tidied(sub)
    return cmd


def _with_language(cmd: Any) -> None:
    """``cmd``'s help lists ``--lang`` (read before parsing, by :func:`language_option`, and taken off the
    command line: the command itself never sees it)."""
    if not any("--lang" in getattr(param, "opts", ()) for param in cmd.params):
        cmd.params.append(_language_param())


def _language_param() -> Any:
    """The ``--lang`` option as typer builds it (a copy for each command: its help is translated in place)."""
    return copy.copy(_built_language_param())


@cache
def _built_language_param() -> Any:
    """The ``--lang`` option, built once: the one parameter of a command made for it."""
    import typer.main

    def speak(lang: Annotated[str, typer.Option("--lang", metavar="<en|zh>", show_default=False,
                                                 help=EN["cli.opt.lang"])] = "") -> None:  # translated when shown
        """Nothing: the command that carries the option."""

    probe = typer.Typer(add_completion=False)
    probe.command()(speak)
    param = typer.main.get_command(probe).params[0]
    param.expose_value = False  # never handed to a command's function
    return param


def main(argv: list[str] | None = None, *, env: Env | None = None) -> int:
    """Run the CLI; returns the exit code: 0 done, 1 ``check`` found the solution
    wrong, 2 a usage error or unusable input, 3 attn-tutor itself failed (a bug),
    130 interrupted by Ctrl-C (one ``interrupted`` line on stderr; a practice
    session interrupted ends with its summary and 0 instead).

    ``argv`` defaults to ``sys.argv[1:]``; ``env`` to the process's own
    (:meth:`Env.from_process`, the one place the environment is read: the
    variables, the standard streams; tests pass theirs).  The Env reaches
    the commands as the click context's object
    (:func:`tutor.cli.common.environment`), and its language is spoken for
    the whole run (:func:`tutor.base.messages.use_language`).  Every outcome
    passes through here (Typer runs with ``standalone_mode=False``): a usage
    error is one ``error: ...`` line and a ``try 'attn-tutor COMMAND
    --help'`` line (:func:`_show_usage_error`), every :class:`TutorError`
    becomes ``error: ...`` lines on stderr, any other exception one
    ``internal error`` line naming its type and place (the traceback only
    with ``Env.debug``, ``ATTN_TUTOR_DEBUG=1``), never a traceback and never
    exit code 1.  With ``--format json`` on the command line, an error also
    prints one JSON document on stdout (:func:`error_document`).  Output goes
    through :class:`tutor.cli.streams.GuardedStream` (the Env's stdout and
    stderr, installed as ``sys.stdout``/``sys.stderr`` for the run, where
    typer, click and rich write): text is escaped, encodable, and an output
    that cannot be written is one error line and exit 2.
    """
    args = sys.argv[1:] if argv is None else list(argv)
    plug_closed_descriptors()
    try:
        lang, args = language_option(args)
        if env is None:
            env = Env.from_process(language=lang)
        elif lang is not None:
            env = replace(env, language=lang)
    except UnknownLanguage as err:
        if env is None:  # the error itself in the language the environment asks for, if it asks for one
            try:
                env = Env.from_process()
            except UnknownLanguage:
                env = None
        return _before_the_run(args, str(err), env)
    env = _shown_language(env)
    real_out, real_err = sys.stdout, sys.stderr
    out = GuardedStream(env.stdout, required=True)
    sys.stdout = out
    sys.stderr = GuardedStream(env.stderr, required=False)
    try:
        with use_language(env.language):
            code = _run(args, env)
            if out.failure is not None and code != EXIT_INPUT:  # also when a library swallowed the OutputError
                sys.stderr.write(t("cli.error", message=t("cli.output_failed", reason=out.failure)) + "\n")
                code = EXIT_INPUT
        return code
    finally:
        sys.stdout, sys.stderr = real_out, real_err


def language_option(args: list[str]) -> tuple[str | None, list[str]]:
    """The language ``--lang`` asks for (``--lang zh``, ``--lang=zh``, anywhere before ``--``; the last
    one given wins), and ``args`` without it.  Read before the command line is parsed, so that its help
    and errors are in that language; every command lists the option (:func:`_with_language`).

    Raises :class:`UnknownLanguage` for a language attn-tutor does not speak, or ``--lang`` without one.

    >>> language_option(["explain", "x", "--lang", "zh"]), language_option(["--lang=en", "list"])
    (('zh', ['explain', 'x']), ('en', ['list']))
    """
    lang: str | None = None
    rest: list[str] = []
    it = iter(enumerate(args))
    for i, arg in it:
        if arg == "--":
            rest.extend(args[i:])
            break
        if arg == "--lang" or arg.startswith("--lang="):
            value = arg[len("--lang="):] if "=" in arg else next(it, (None, None))[1]
            if not value:
                raise UnknownLanguage(t("cli.lang.missing", languages=", ".join(LANGUAGES)))
            code = language_code(value)
            if code is None:
                cut = value if len(value) <= 40 else value[:40] + "…"
                raise UnknownLanguage(t("cli.lang.unknown", value=shown(cut), where="--lang",
                                        languages=", ".join(LANGUAGES)))
            lang = code
            continue
        rest.append(arg)
    return lang, rest


def _shown_language(env: Env) -> Env:
    """``env``, or, when its output cannot show its language's script (Chinese on an ASCII or Latin-1 stream,
    where every character would be an escape), ``env`` speaking English, said in one warning line on stderr."""
    name = LANGUAGES.get(env.language)  # a test's own catalogue has none: nothing to check
    if env.language == "en" or name is None or env.stdout is None:
        return env
    encoding = getattr(env.stdout, "encoding", None) or "utf-8"
    try:
        name.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        message = t("cli.lang.cannot_show", encoding=encoding, language=env.language)
        GuardedStream(env.stderr, required=False).write(message + "\n")
        return replace(env, language="en")
    return env


def _before_the_run(args: list[str], message: str, env: Env | None) -> int:
    """A language that cannot be spoken, found before the run (``--lang``, ``ATTN_TUTOR_LANG``): one
    ``error:`` line and the ``try`` line on stderr (in English, or the language of ``env``), exit 2."""
    stderr = GuardedStream(env.stderr if env is not None else sys.stderr, required=False)
    stdout = GuardedStream(env.stdout if env is not None else sys.stdout, required=True)
    real_out, real_err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = stdout, stderr
    try:
        with use_language(env.language if env is not None else "en"):
            try:
                language_option(args)  # said again, in this language: --lang's error
            except UnknownLanguage as again:
                message = str(again)
            code = _fail(args, "usage", EXIT_INPUT, message)
            words = [a for i, a in enumerate(args) if not (a.startswith("--lang") or (i and args[i - 1] == "--lang"))]
            sys.stderr.write(t("cli.usage.try", command=shown(_command_path(words))) + "\n")
            sys.stdout.flush()
        return code
    finally:
        sys.stdout, sys.stderr = real_out, real_err


def command() -> CommandLine:
    """The click command of a run: the root :class:`CommandLine` (its own help tidied as
    :func:`_tidied` says), whose commands are built from :data:`app` when asked for."""
    import typer.main

    return _tidied(typer.main.get_command(_root(CommandLine)))


def _run(args: list[str], env: Env) -> int:
    """Run the app on ``args`` with the guarded streams in place; every way out becomes an exit code."""
    try:
        try:
            result = command().main(args=args, prog_name="attn-tutor", standalone_mode=False, obj=env)
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
    except KeyboardInterrupt:  # outside Typer's own handling (which turns it into the exit code below)
        return _interrupted()
    except typer.Abort:  # click's answer to end of input inside a prompt
        return _fail(args, "input", EXIT_INPUT, t("cli.aborted"))
    except Exception as err:  # noqa: BLE001 - the one place every failure is reported
        if _is_usage_error(err):
            return _fail(args, "usage", EXIT_INPUT, _show_usage_error(err, args), echo=False)
        return _internal_error(args, err, debug=env.debug)
    if result == EXIT_INTERRUPTED:  # Typer's answer to Ctrl-C (KeyboardInterrupt -> Exit(130)); no command returns it
        return _interrupted()
    return _not_wrong(result)


def _interrupted() -> int:
    """Ctrl-C ended a command (a practice session never gets here: it ends with its summary, exit 0)."""
    sys.stderr.write(t("cli.interrupted") + "\n")
    return EXIT_INTERRUPTED


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


def _show_usage_error(err: Exception, args: list[str]) -> str:
    """Print a usage error on stderr as every error is printed: one ``error: ...`` line, then one
    ``try 'attn-tutor COMMAND --help'`` line (not Typer's usage line and boxed panel).  Returns the message.

    Click's message is made one line (a multi-line one joined with ``; ``), its first letter lower
    case and its final period dropped, as attn-tutor's own errors read.  With no command at all
    (``attn-tutor`` alone) the help is already on stdout: the line says no command was given.
    """
    if type(err).__name__ == "NoArgsIsHelpError":  # by name, as Typer itself tells it apart
        message = t("cli.usage.no_command")
    else:
        text = str(err.format_message())  # type: ignore[attr-defined]
        message = "; ".join(line.strip() for line in lines(text) if line.strip()) or text
        if message[:1].isupper() and message[1:2].islower():
            message = message[0].lower() + message[1:]
        message = usage_message(message.removesuffix("."))
    sys.stderr.write(t("cli.error", message=shown(message)) + "\n")
    if type(err).__name__ != "NoArgsIsHelpError":
        ctx = getattr(err, "ctx", None)  # None for an option without its value: the command is read off args
        command = str(ctx.command_path) if ctx is not None else _command_path(args)
        sys.stderr.write(t("cli.usage.try", command=shown(command)) + "\n")
    return message


#: click's and pydantic's usage messages (as :func:`_show_usage_error` writes them: one line, lower case first, no
#: final period), each with the key that says it in the language of the run; the reason of an invalid value too.
USAGE_MESSAGES = (
    (r"no such option: (?P<option>\S+) \(Possible options: (?P<options>.*)\)", "cli.usage.no_such_option.suggest"),
    (r"no such option: (?P<option>\S+)", "cli.usage.no_such_option"),
    (r"no such command '(?P<name>.*)'", "cli.usage.no_such_command"),
    (r"missing argument '(?P<name>.*)'", "cli.usage.missing_argument"),
    (r"missing option '(?P<name>.*)'", "cli.usage.missing_option"),
    (r"option '(?P<option>[^']*)' requires an argument", "cli.usage.needs_value"),
    (r"option '(?P<option>[^']*)' does not take a value", "cli.usage.takes_no_value"),
    (r"got unexpected extra arguments? ?(?:\(s\))? \((?P<args>.*)\)", "cli.usage.extra"),
    (r"invalid value for '(?P<param>[^']*)': (?P<reason>.*)", "cli.usage.invalid_value"),
    (r"invalid value for (?P<param>--[\w-]+): (?P<reason>.*)", "cli.usage.invalid_value"),
)
REASONS = (
    (r"Input should be a valid integer.*", "cli.usage.reason.integer"),
    (r"Input should be a valid number.*", "cli.usage.reason.number"),
    (r"Input should be less than or equal to (?P<n>\S+)", "cli.usage.reason.at_most"),
    (r"Input should be greater than or equal to (?P<n>\S+)", "cli.usage.reason.at_least"),
    (r"Input should be less than (?P<n>\S+)", "cli.usage.reason.below"),
    (r"Input should be greater than (?P<n>\S+)", "cli.usage.reason.above"),
    (r"Value error, '(?P<value>.*)' is not one of (?P<choices>.*)", "cli.usage.reason.choice"),
    (r"(?i:file|dir|directory|path) '(?P<path>.*)' is a directory", "cli.usage.reason.is_directory"),
    (r"(?i:file|dir|directory|path) '(?P<path>.*)' is a file", "cli.usage.reason.is_file"),
    (r"(?i:file|dir|directory|path) '(?P<path>.*)' does not exist", "cli.usage.reason.missing"),
    (r"(?i:file|dir|directory|path) '(?P<path>.*)' is not readable", "cli.usage.reason.unreadable"),
    (r"(?i:file|dir|directory|path) '(?P<path>.*)' is not writable", "cli.usage.reason.unwritable"),
    (r"'(?P<path>.*)': (?P<reason>[^']*)", "cli.usage.reason.open"),  # a file click could not open: the system's reason
)


def usage_message(message: str) -> str:
    """A usage error's message (click's or pydantic's English) in the language of the run: said by its key
    (:data:`USAGE_MESSAGES`, :data:`REASONS`) in any language but English; one no key says stays as written.

    >>> from tutor.base.messages import use_language
    >>> with use_language("zh"):
    ...     usage_message("invalid value for '--precision': Input should be less than or equal to 15")
    "'--precision' 的值无效：应不大于 15"
    """
    if language() == "en":
        return message
    for pattern, key in USAGE_MESSAGES:
        m = re.fullmatch(pattern, message)
        if m:
            fields = m.groupdict()
            if "reason" in fields:
                fields["reason"] = _reason(fields["reason"])
            return t(key, **fields)
    return message


def _reason(reason: str) -> str:
    """Why click refused a value (:data:`REASONS`), in the language of the run; a system error's sentence
    (``strerror``) said as :func:`tutor.base.outfile.system_reason` says it."""
    for pattern, key in REASONS:
        m = re.fullmatch(pattern, reason)
        if m:
            fields = m.groupdict()
            if "reason" in fields:
                from ..base.outfile import system_reason

                fields["reason"] = system_reason(fields["reason"])
            return t(key, **fields)
    return reason


def _command_path(args: list[str]) -> str:
    """``attn-tutor COMMAND`` for the command ``args`` run (its first word that is not an option), else ``attn-tutor``."""
    first = next((a for a in args if not a.startswith("-")), None)
    names = [name for name, _, _ in COMMANDS]
    return f"attn-tutor {first}" if first in names else "attn-tutor"


def _fail(args: list[str], kind: str, code: int, message: str, problems: object = None, *, echo: bool = True) -> int:
    """Report an error: ``error:`` lines on stderr (unless already shown), the JSON document with --format json."""
    if echo:
        for line in lines(message):
            sys.stderr.write(t("cli.error", message=shown(line, keep="\t")) + "\n")
    if wants_json(args):
        try:
            write(error_document(kind, code, message, problems))
        except (TutorError, OSError):  # stdout itself is the problem: stderr has said it
            pass
    return code


def _internal_error(args: list[str], err: Exception, *, debug: bool) -> int:
    """An exception attn-tutor did not expect: one line naming its type and where it was raised
    (and its traceback first when ``debug``)."""
    import traceback

    from ..base.errors import where_raised

    if debug:
        traceback.print_exception(err, file=sys.stderr)
    message = t("cli.internal", kind=type(err).__name__, where=where_raised(err))
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
    from ..authoring.validate import problem_dict
    from ..base.jsontext import compact

    if isinstance(problems, (list, tuple)) and problems:
        errors = [problem_dict(p, "error") for p in problems]
    else:
        errors = [{"file": None, "line": None, "column": None, "field": "", "message": line, "hint": "",
                   "severity": "error", "text": shown(line, keep="\t")} for line in lines(message)]
    return compact({"error": kind, "exit_code": code, "errors": errors})


def run() -> None:  # pragma: no cover - the console script
    sys.exit(main())
