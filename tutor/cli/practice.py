"""`practice` and `stats`: options parsed here, the session planned by :mod:`tutor.practice.plan` and run by :mod:`tutor.practice.session`.

``practice`` reads its answers from the standard input :func:`tutor.cli.main`
was given (a terminal, with line editing, or piped text: one answer per
line).  Ctrl-C and the end of input end the session with its summary and
exit code 0; answers that could not be saved by the end are an error (exit
code 2) after the summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..base.messages import t
from ..base.textsafe import shown
from .common import (
    MAX_SEED,
    ExercisesOpt,
    Format,
    FormatOpt,
    HeadOpt,
    ToleranceOpt,
    check_head,
    check_tolerance,
    console,
    environment,
    folders,
    head_index,
    store_path,
    warn,
    write,
    write_json,
)

if TYPE_CHECKING:
    from ..base.env import Env
    from ..practice.plan import Plan


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
    head: HeadOpt = None,
    mode: Annotated[PracticeMode, typer.Option("--mode", help=t("cli.practice.mode"))] = PracticeMode.matrix,
    tolerance: ToleranceOpt = None,
    restart: Annotated[bool, typer.Option("--restart", help=t("cli.practice.restart"))] = False,
    due: Annotated[bool, typer.Option("--due", help=t("cli.practice.due"))] = False,
    exercises: ExercisesOpt = None,
    backward: Annotated[bool, typer.Option("--backward", help=t("cli.practice.backward"))] = False,
    fresh: Annotated[bool, typer.Option("--fresh", help=t("cli.practice.fresh"))] = False,
    seed: Annotated[int | None, typer.Option("--seed", help=t("cli.practice.seed"), min=0, max=MAX_SEED, show_default=False)] = None,
    tiled: Annotated[bool, typer.Option("--tiled", help=t("cli.practice.tiled"))] = False,
    block_size: Annotated[int, typer.Option("--block-size", help=t("cli.opt.block_size"), min=1, max=16)] = 2,
    query: Annotated[str | None, typer.Option("--query", help=t("cli.practice.query"), show_default=False)] = None,
) -> None:
    """Drill an exercise (or the one that trains the weakest step, or what is due) in a session
    recorded in the progress store; an interrupted session of the same steps is resumed.

    ``--fresh`` drills the exercise's shape with new numbers (``new --like ID
    --seed S`` writes the same ones); progress is recorded under the original id,
    and a fresh session begins anew (an unfinished one was on other numbers).
    """
    from ..exercise.catalog import resolve
    from ..practice import Settings
    from ..practice import plan as plans
    from ..practice.session import practise
    from ..practice.terminal import answer_stream
    from ..render.quiz import QuizRenderer
    from ..store import Store

    env = environment(ctx)
    if tiled:  # FlashAttention's online softmax, quantity by quantity: a session of its own, not recorded
        from .tiled import practice_tiled

        others = [name for name, given in (("--steps", steps is not None), ("--due", due), ("--backward", backward),
                                           ("--fresh", fresh), ("--seed", seed is not None), ("--restart", restart),
                                           ("--mode", mode is not PracticeMode.matrix)) if given]
        practice_tiled(ctx, exercise, head=head, block_size=block_size, query=query, tolerance=tolerance,
                       folders=folders(env, exercises), others=others)
        return
    if query is not None:
        raise typer.BadParameter(t("tiled.practice.query_alone"), param_hint="--query")
    source = ctx.get_parameter_source("block_size")
    if source is not None and source.name != "DEFAULT":
        raise typer.BadParameter(t("tiled.practice.block_alone"), param_hint="--block-size")
    chosen = _parse_steps(steps)
    check_tolerance(tolerance)
    if due and chosen is not None:
        raise typer.BadParameter(t("practice.due.steps"), param_hint="--due")
    if seed is not None and not fresh:
        raise typer.BadParameter(t("practice.seed_without_fresh"), param_hint="--seed")
    stream = answer_stream(env.stdin)  # before the store is opened: a session that cannot read leaves no trace
    store = Store.open(store_path(env))  # a damaged, foreign or read-only store stops here, before any question
    try:
        packs = folders(env, exercises)
        ex = None if exercise is None else resolve(exercise, packs)
        if ex is not None:
            check_head(head, ex.num_heads)
        if backward:  # every backward step of the exercise, the forward pass given (issue 13)
            if ex is None or chosen is not None or due:
                raise typer.BadParameter(t("practice.backward.alone"), param_hint="--backward")
            from ..steps import BACKWARD_IDS, keys

            chosen = [id for id in BACKWARD_IDS if any(k[0] == id for k in keys(ex, backward=True))]
        plan: plans.Plan | str | None
        if due:
            plan = plans.due(store, ex, packs)
        elif ex is None:
            plan = plans.weakest(store, packs, head_index(head))
            if plan is None:
                raise typer.BadParameter(t("practice.no_bundled"), param_hint="EXERCISE")
        else:
            plan = plans.chosen(ex, chosen, head_index(head))
        if isinstance(plan, str):  # nothing is due: say so, and when
            console(env).print(plan, markup=False, highlight=False)
            return
        if fresh:
            plan = _fresh(plan, exercise, exercises or (), seed)
        else:
            plan = plans.resume(store, plan, mode.value, restart=restart)
        practise(plan, Settings(mode.value, tolerance), store=store, stream=stream, view=QuizRenderer(console(env)),
                 report=lambda message: warn(t("cli.error", message=message)))
    finally:
        store.close()


def _fresh(plan: Plan, named: str | None, exercises: Sequence[Path], seed: int | None) -> Plan:
    """``plan`` on fresh numbers of its exercise's shape (seed ``seed``, else a random one), recorded
    under the original id, with the sentence giving the ``new --like`` command that writes them
    (with the ``--exercises`` folders given; ``ATTN_TUTOR_PATH`` speaks for itself)."""
    import shlex
    from dataclasses import replace

    from ..authoring.generate import fresh as fresh_numbers
    from ..steps import has_backward, solve

    original = plan.sol.exercise
    seed = _random_seed() if seed is None else seed
    ex = fresh_numbers(original, seed)
    like = " ".join(shlex.quote(str(a)) for a in [named or original.id, *(f"--exercises={d}" for d in exercises)])
    why = "\n".join(filter(None, [plan.why, t("practice.fresh", id=ex.id, like=like, seed=seed)]))
    back = plan.steps is not None and has_backward(plan.steps)  # practice --fresh --backward: the gradients too
    return replace(plan, sol=solve(ex, backward=back), why=why, record_as=original.id)


def _random_seed() -> int:
    import os

    return int.from_bytes(os.urandom(4), "big") % 1_000_000


def stats(
    ctx: typer.Context,
    fmt: FormatOpt = Format.rich,
    export: Annotated[Path | None, typer.Option("--export", help=t("cli.stats.export"), dir_okay=False,
                                                show_default=False)] = None,
    force: Annotated[bool, typer.Option("--force", help=t("cli.stats.force"))] = False,
) -> None:
    """Show accuracy by step, mistakes by kind, the review schedule and what to practise next;
    never writes to the store.  ``--export FILE``: write the learner's own record there instead
    (:func:`tutor.store.export.export_document`, issue 24), for an instructor's ``report``."""
    if export is not None:
        _export_stats(environment(ctx), export, force)
        return
    from ..drills.results import counted, drills_document
    from ..practice.plan import heads_by_id, recommendation
    from ..practice.stats import stats_document
    from ..store import Store

    env = environment(ctx)
    path = store_path(env)
    store = Store.open_existing(path)
    try:
        data, rec = recommendation(store, env.packs)
        drills = drills_document(counted(data.drill_outcomes))
    finally:
        if store is not None:
            store.close()
    doc = stats_document(data, rec, str(path), heads_by_id(env.packs))
    doc["drills"] = drills  # issue 14: the drills' answers, by drill and topic
    if fmt is Format.json:

        write_json(doc)  # ASCII: safe on any stream
        return
    from ..render.stats import render_stats

    render_stats(doc, console(env))


def _export_stats(env: Env, path: Path, force: bool) -> None:
    """``stats --export FILE``: the learner's record as JSON in ``path`` (refused as every file attn-tutor
    writes is: :func:`tutor.base.outfile.write_file`); one line on stderr says where it went."""
    from ..base.jsontext import document
    from ..base.outfile import check_target, write_file
    from ..store import Store
    from ..store.export import export_document
    from ..store.queries import Stats

    check_target(path, force=force)
    store = Store.open_existing(store_path(env))
    try:
        data = store.stats(top=10_000) if store is not None else Stats()
    finally:
        if store is not None:
            store.close()
    write_file(path, document(export_document(data)), force=force)
    write(t("stats.exported", path=shown(str(path))))
