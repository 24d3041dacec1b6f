"""`practice` and `stats` (issue 4): options parsed here, the session run by :mod:`tutor.session`.

``practice`` reads its answers from the standard input :func:`tutor.cli.main`
was given (a terminal, with line editing, or piped text: one answer per
line).  Ctrl-C and the end of input end the session with its summary and
exit code 0; answers that could not be saved by the end are an error (exit
code 2) after the summary.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

from ..jsontext import document
from ..messages import t
from .common import ExercisesOpt, Format, FormatOpt, check_head, console, stdin, warn, write_document


class PracticeMode(str, Enum):
    matrix = "matrix"
    entry = "entry"


def _parse_steps(text: str | None) -> list[str] | None:
    """``--steps``: the step ids, comma-separated (any case); a usage error for an unknown one."""
    from ..steps import STEP_IDS

    if text is None:
        return None
    names = [s.strip().lower() for s in text.split(",") if s.strip()]
    unknown = [s for s in names if s not in STEP_IDS]
    if unknown or not names:
        raise typer.BadParameter(t("practice.bad_steps", found=", ".join(unknown) or text, known=", ".join(STEP_IDS)),
                                 param_hint="--steps")
    return names


def practice(
    ctx: typer.Context,
    exercise: Annotated[str | None, typer.Argument(help=t("cli.practice.exercise"), show_default=False)] = None,
    steps: Annotated[str | None, typer.Option("--steps", help=t("cli.practice.steps"), show_default=False)] = None,
    head: Annotated[int | None, typer.Option("--head", help=t("cli.practice.head"), min=0, show_default=False)] = None,
    mode: Annotated[PracticeMode, typer.Option("--mode", help=t("cli.practice.mode"))] = PracticeMode.matrix,
    tolerance: Annotated[float | None, typer.Option("--tolerance", help=t("cli.practice.tolerance"),
                                                    show_default=False)] = None,
    exercises: ExercisesOpt = None,
    fresh: Annotated[bool, typer.Option("--fresh", help=t("cli.practice.fresh"))] = False,
    seed: Annotated[int | None, typer.Option("--seed", help=t("cli.practice.seed"), min=0, show_default=False)] = None,
) -> None:
    """Drill an exercise (or the one that trains the weakest step) in a session recorded in the progress store.

    ``--fresh`` drills the exercise's shape with new numbers (``new --like ID
    --seed S`` writes the same ones); progress is recorded under the original id.
    """
    from ..answers import DEFAULT_TOLERANCE
    from ..catalog import resolve
    from ..quiz import Settings
    from ..session import answer_stream, practise, recommendation, step_kinds, why_picked
    from ..steps import solve
    from ..store import Store

    chosen = _parse_steps(steps)
    if seed is not None and not fresh:
        raise typer.BadParameter(t("practice.seed_without_fresh"), param_hint="--seed")
    if tolerance is not None and not 0 < tolerance <= 1e6:  # also refuses nan
        raise typer.BadParameter(t("practice.bad_tolerance", found=tolerance), param_hint="--tolerance")
    stream = answer_stream(stdin(ctx))  # before the store is opened: a session that cannot read leaves no trace
    store = Store.open()  # a damaged, foreign or read-only store stops here, before any question
    try:
        picked = ""
        if exercise is None:
            _, rec = recommendation(store, exercises or ())
            if rec is None:
                raise typer.BadParameter(t("practice.no_bundled"), param_hint="EXERCISE")
            exercise = rec.exercise
            picked = why_picked(rec)
        ex = resolve(exercise, exercises or ())
        if fresh:  # resolved before the session starts; recorded under the original id
            import shlex

            from ..generate import fresh as fresh_numbers

            seed = _random_seed() if seed is None else seed
            ex = fresh_numbers(ex, seed)
            like = " ".join(shlex.quote(str(a)) for a in [exercise, *(f"--exercises={d}" for d in exercises or ())])
            picked = "\n".join(filter(None, [picked, t("practice.fresh", id=ex.id, like=like, seed=seed)]))
        check_head(head, ex.num_heads)
        sol = solve(ex)
        if chosen is not None:
            missing = [s for s in chosen if s not in step_kinds(ex)]
            if missing:
                raise typer.BadParameter(t("practice.missing_steps", steps=", ".join(missing), id=ex.id,
                                           has=", ".join(s.id for s in sol.steps if s.head in (0, None))),
                                         param_hint="--steps")
        settings = Settings(mode.value, tolerance if tolerance is not None else DEFAULT_TOLERANCE)
        practise(sol, settings, store=store, stream=stream, console=console(), steps=chosen, head=head,
                 picked=picked, report=lambda message: warn(t("cli.error", message=message)))
    finally:
        store.close()


def _random_seed() -> int:
    import os

    return int.from_bytes(os.urandom(4), "big") % 1_000_000


def stats(
    fmt: FormatOpt = Format.rich,
) -> None:
    """Show accuracy by step, frequent mistakes and what to practise next; never writes to the store."""
    from ..session import recommendation, stats_document
    from ..store import Store, default_path

    path = default_path()
    store = Store.open_existing(path)
    try:
        data, rec = recommendation(store)
    finally:
        if store is not None:
            store.close()
    doc = stats_document(data, rec, str(path))
    if fmt is Format.json:

        write_document(document(doc))  # ASCII: safe on any stream
        return
    from ..render.quiz import render_stats

    render_stats(doc, console())
