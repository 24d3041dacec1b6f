"""`code list|start|check|show` (issue 21): katas that run the learner's own implementation and name the bug.

A Typer sub-app (``app``), registered in :data:`tutor.cli.COMMANDS` under
``code``.  ``check`` is the one command that runs code: the file named on its
command line, as the learner's own program, in a child process with limits
(:mod:`tutor.katas.run`).  Its exit code: 0 every case passed, 1 a case
failed, 2 the file cannot be run as the kata.  ``start`` and ``show`` write the
kata's file in the language of the run (``numpy_start.zh.py`` beside
``numpy_start.py``, see :func:`_file`).  Nothing here imports numpy or sympy at
import time.
"""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..base.messages import t
from .common import (
    Format,
    FormatOpt,
    HelpCommand,
    HelpGroup,
    SolutionWrong,
    console,
    environment,
    store_path,
    warn,
    write,
    write_json,
)

if TYPE_CHECKING:
    from ..base.env import Env
    from ..katas.check import Checked
    from ..katas.kata import Kata

class Flavour(str, Enum):
    """`--flavour` of ``code check``: the file's flavour, whatever it imports."""

    numpy = "numpy"
    torch = "torch"


def _width() -> int:
    """The terminal's width for wrapping a report (80 when standard output is not a terminal)."""
    import shutil

    return shutil.get_terminal_size((80, 24)).columns


CODE_PREFIX = "drill:code"  # answers are stored as a drill's: practice statistics leave them out


app = typer.Typer(help=t("cli.code.help"), no_args_is_help=True, add_completion=False,
                  context_settings={"help_option_names": ["-h", "--help"]}, cls=HelpGroup)

KataArg = Annotated[str, typer.Argument(help=t("cli.code.kata"), show_default=False)]
TorchOpt = Annotated[bool, typer.Option("--torch", help=t("cli.code.torch"))]
ForceOpt = Annotated[bool, typer.Option("--force", help=t("cli.code.force"))]


def _step(kata: str) -> str:
    return f"{CODE_PREFIX}:{kata}"


def _progress(env: Env) -> tuple[set[str], set[str]]:
    """The katas whose check has passed at least once, and those due for review (the FSRS schedule of
    the skill ``(drill:code:<kata>, code)``), read from the progress store (none while it is absent)."""
    from datetime import UTC, datetime

    from ..store import Store, skills

    store = Store.open_existing(store_path(env))
    if store is None:
        return set(), set()
    try:
        rows = store.read("SELECT DISTINCT step FROM answers WHERE substr(step, 1, 11) = ? AND outcome = 'correct'",
                          (CODE_PREFIX + ":",))
        now = datetime.now(UTC)
        due = {s.step for s in skills(store, now) if s.family == "code" and s.is_due(now)}
    finally:
        store.close()
    cut = len(CODE_PREFIX) + 1
    return {str(step)[cut:] for (step,) in rows}, {step[cut:] for step in due}


def _passed_katas(env: Env) -> set[str]:
    return _progress(env)[0]


@app.command("list", help=t("cli.code.list.help"), cls=HelpCommand)
def list_(ctx: typer.Context, fmt: FormatOpt = Format.rich) -> None:
    from ..katas import catalog
    from ..render.katas import list_document, list_lines

    env = environment(ctx)
    done, due = _progress(env)
    rows = [{"id": k, "title": t(f"code.kata.{k}"), "done": k in done, "review_due": k in done and k in due}
            for k in catalog.IDS]
    if fmt is Format.json:
        write_json(list_document(rows))
        return
    write("\n".join(list_lines(rows, console(env).width)))


def _file(kata: Kata, torch: bool, kind: str) -> Path:
    """The kata's skeleton (``kind`` "start") or reference solution ("solution") in the language of the run.

    ``tutor/katas/files/<kata>/{numpy,torch}_{start,solution}.py`` is English; a translation sits beside it
    as ``<name>.<language>.py`` (``numpy_start.zh.py``): the same code, byte for byte, with its comments,
    docstrings and TODOs in that language (``tests/test_kata_zh.py`` holds it to that).  A language
    with no file of its own gets the English one.
    """
    from ..base.messages import language

    folder = Path(__file__).parent.parent / "katas" / "files" / kata.id
    name = f"{'torch' if torch else 'numpy'}_{kind}"
    translated = folder / f"{name}.{language()}.py"
    return translated if language() != "en" and translated.is_file() else folder / f"{name}.py"


@app.command("start", help=t("cli.code.start.help"), cls=HelpCommand)
def start(
    ctx: typer.Context,
    kata: KataArg,
    torch: TorchOpt = False,
    output: Annotated[Path | None, typer.Option("-o", "--output", help=t("cli.code.output"), show_default=False)] = None,
    force: ForceOpt = False,
) -> None:
    from ..base.outfile import write_file
    from ..base.textsafe import shown
    from ..katas import catalog

    k = catalog.get(kata)
    target = output or Path(f"{k.id.replace('-', '_')}{'_torch' if torch else ''}.py")
    write_file(target, _file(k, torch, "start").read_text(encoding="utf-8"), force=force)
    write(t("code.start.written", file=shown(str(target)), kata=k.id))


@app.command("show", help=t("cli.code.show.help"), cls=HelpCommand)
def show(ctx: typer.Context, kata: KataArg, torch: TorchOpt = False, force: ForceOpt = False) -> None:
    from ..base.errors import TutorError
    from ..katas import catalog

    k = catalog.get(kata)
    if not force and k.id not in _passed_katas(environment(ctx)):
        raise TutorError(t("code.show.locked", kata=k.id))
    write(_file(k, torch, "solution").read_text(encoding="utf-8").rstrip("\n"))


def _follow_ups(kata: Kata) -> list[tuple[str, str, str]]:
    """The follow-up questions of a passed kata: ``(id, question, topic)`` from the bundled concept bank, the
    question in the language of the run (its ``translations``, else English)."""
    from ..base.messages import language
    from ..drills.bank import load

    bank = load()
    out = []
    for qid in kata.follow_ups:
        try:
            concept = bank.get(qid)
        except KeyError:
            continue
        out.append((qid, concept.q.in_language(language()).question, concept.topic))
    return out


def _record(env: Env, checked: Checked) -> None:
    """The check's result in the progress store, as a review of the kata (a skill of the ``code`` family)."""
    from ..base.errors import StoreError
    from ..store import Store
    from ..store.attempt import Attempt

    report = checked.report
    passed = report.passed and checked.run.status == "ran"
    attempt = Attempt(CODE_PREFIX, _step(report.kata.id), None, "correct" if passed else "wrong",
                      diagnoses=report.mistakes, family="code")
    try:
        store = Store.open(store_path(env))
        try:
            session = store.begin_session(CODE_PREFIX, mode="code", tolerance=0.0)
            store.record(session, attempt)
            store.end_session(session, complete=passed)
        finally:
            store.close()
    except StoreError as err:
        warn(t("code.unsaved", reason=str(err)))


def _check_once(env: Env, file: Path, kata: str | None, python: str | None, fmt: Format, time_limit: float,
                flavour: Flavour | None) -> bool:
    from ..katas.check import check, kata_of
    from ..render.katas import check_document, check_lines

    k = kata_of(file, kata)
    checked = check(file, k, python=python, time_limit=time_limit, environ=env.environ,
                    flavour=None if flavour is None else flavour.value)
    passed = checked.report.passed and checked.run.status == "ran"
    follow = _follow_ups(k) if passed else []
    _record(env, checked)
    if fmt is Format.json:
        write_json(check_document(checked.report, checked.run, str(file), follow))
    else:
        write("\n".join(check_lines(checked.report, checked.run, str(file), follow, width=env.width or _width())))
    return passed


@app.command("check", help=t("cli.code.check.help"), cls=HelpCommand)
def check_(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help=t("cli.code.file"), show_default=False)],
    kata: Annotated[str | None, typer.Option("--kata", help=t("cli.code.kata_opt"), show_default=False)] = None,
    python: Annotated[str | None, typer.Option("--python", help=t("cli.code.python"), show_default=False)] = None,
    watch: Annotated[bool, typer.Option("--watch", help=t("cli.code.watch"))] = False,
    time_limit: Annotated[float, typer.Option("--time-limit", help=t("cli.code.time_limit"), min=0.1, max=600.0)] = 10.0,
    flavour: Annotated[Flavour | None, typer.Option("--flavour", help=t("cli.code.flavour"), show_default=False)] = None,
    fmt: FormatOpt = Format.rich,
) -> None:
    env = environment(ctx)
    if not watch:
        if not _check_once(env, file, kata, python, fmt, time_limit, flavour):
            raise SolutionWrong()
        return
    from ..katas.watch import watch_file

    def waiting() -> None:
        write(t("code.watch.waiting", file=str(file)))
        sys.stdout.flush()

    summary = watch_file(file, lambda: _watch_step(env, file, kata, python, fmt, time_limit, flavour),
                         waiting=waiting)
    if not summary.checks:  # Ctrl-C before the first check finished: there is no last one to speak of
        write(t("code.watch.summary_none"))
        return
    write(t("code.watch.summary", checks=summary.checks, passes=summary.passes,
            last=t("code.watch.last_passed") if summary.last else t("code.watch.last_failed")))


def _watch_step(env: Env, file: Path, kata: str | None, python: str | None, fmt: Format, time_limit: float,
                flavour: Flavour | None) -> bool:
    from ..base.errors import TutorError

    write(t("code.watch.checking", file=str(file)))
    try:
        return _check_once(env, file, kata, python, fmt, time_limit, flavour)
    except TutorError as err:  # a syntax error while editing: said, and the watch goes on
        for line in str(err).split("\n"):
            warn(t("cli.error", message=line))
        return False

