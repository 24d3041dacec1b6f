"""`drill shapes|counts|masks|concepts|interview` (issue 14): options parsed here, the drills run by :mod:`tutor.drills`.

A Typer sub-app (``app``), registered in :data:`tutor.cli.COMMANDS` under
``drill``.  Every drill takes ``--seed`` (the same seed asks the same
questions), ``--show-answers`` (print the questions with their answers, for a
quiz key) and ``--format json`` (the questions -- and with ``--show-answers``
their answers -- as JSON, for scripts); otherwise the questions are asked on
standard input (a terminal, or piped text: one answer per line), every answer
is saved in the progress store, and Ctrl-C or the end of input ends the run
with its summary (exit code 0).  Nothing here imports numpy or sympy at
import time.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..base.messages import plural, t
from .common import (
    MAX_SEED,
    Format,
    FormatOpt,
    HelpCommand,
    HelpGroup,
    console,
    environment,
    store_path,
    warn,
    write_json,
)

if TYPE_CHECKING:
    from ..base.env import Env
    from ..drills.bank import Bank
    from ..drills.record import Question


class DrillMode(str, Enum):
    """`--mode` of ``drill concepts`` and ``drill interview``."""

    free = "free"
    choice = "choice"


SeedOpt = Annotated[int | None, typer.Option("--seed", help=t("cli.opt.seed"), min=0, max=MAX_SEED, show_default=False)]
ShowOpt = Annotated[bool, typer.Option("--show-answers", help=t("cli.opt.show_answers"))]
ModeOpt = Annotated[DrillMode, typer.Option("--mode", help=t("cli.opt.drill_mode"))]
BankOpt = Annotated[
    list[Path] | None,
    typer.Option("--bank", help=t("cli.opt.bank"), exists=True, file_okay=False, dir_okay=True, show_default=False),
]


app = typer.Typer(help=t("cli.drill.help"), no_args_is_help=True, add_completion=False,
                  context_settings={"help_option_names": ["-h", "--help"]}, cls=HelpGroup)


def _seed(seed: int | None) -> int:
    from ..drills.runs import new_seed

    return new_seed() if seed is None else seed


def _out(env: Env, name: str, questions: list[Question], seed: int, answers: bool, fmt: Format) -> None:
    """``--show-answers`` / ``--format json``: the questions (with their answers) instead of a run."""
    if fmt is Format.json:
        write_json({"drill": name, "seed": seed, "count": len(questions), "answers": answers,
                                 "questions": [q.document(answers) for q in questions]})
        return
    from ..render.drill import DrillView

    DrillView(console(env)).listing(questions, seed, answers)


def _run(ctx: typer.Context, name: str, questions: list[Question], seed: int, mode: str) -> None:
    from ..drills.runs import drill
    from ..practice.terminal import answer_stream
    from ..render.drill import DrillView

    env = environment(ctx)
    stream = answer_stream(env.stdin)  # before the store is opened: a run that cannot read leaves no trace
    drill(name, questions, seed=seed, mode=mode, stream=stream, view=DrillView(console(env)), store=store_path(env),
          report=lambda message: warn(t("cli.error", message=message)))


def _generated(ctx: typer.Context, name: str, make: Callable[[int, int], Any], seed: int | None, count: int,
               show_answers: bool, fmt: Format) -> None:
    """A drill of ``count`` generated questions: printed (``--show-answers``, JSON) or asked."""
    s = _seed(seed)
    questions = make(s, count)
    if show_answers or fmt is Format.json:
        _out(environment(ctx), name, questions, s, show_answers, fmt)
    else:
        _run(ctx, name, questions, s, "drill")


@app.command("shapes", help=t("cli.drill.shapes.help"), cls=HelpCommand)
def shapes(
    ctx: typer.Context,
    seed: SeedOpt = None,
    count: Annotated[int, typer.Option("--count", help=t("cli.opt.count"), min=1, max=200)] = 10,
    show_answers: ShowOpt = False,
    fmt: FormatOpt = Format.rich,
) -> None:
    """The shape at a named point of the forward, for random but sensible sizes."""
    from ..drills import shapes as drill

    _generated(ctx, "shapes", drill.questions, seed, count, show_answers, fmt)


class CountsKind(str, Enum):
    """`--kind` of ``drill counts`` (issue 23): one kind of question (:data:`tutor.drills.inference.KINDS`)."""

    params = "params"
    flops = "flops"
    weights_memory = "weights_memory"
    kv_cache = "kv_cache"
    prefill = "prefill"
    decode = "decode"
    paged = "paged"
    mla = "mla"
    window = "window"
    quant = "quant"


@app.command("counts", help=t("cli.drill.counts.help"), cls=HelpCommand)
def counts(
    ctx: typer.Context,
    seed: SeedOpt = None,
    count: Annotated[int, typer.Option("--count", help=t("cli.opt.count"), min=1, max=200)] = 8,
    kind: Annotated[CountsKind | None, typer.Option("--kind", help=t("cli.opt.counts_kind"), show_default=False)] = None,
    model: Annotated[str | None, typer.Option("--model", help=t("cli.opt.model"), show_default=False)] = None,
    config: Annotated[Path | None, typer.Option("--config", help=t("cli.opt.model_config"), show_default=False)] = None,
    show_answers: ShowOpt = False,
    fmt: FormatOpt = Format.rich,
) -> None:
    """Parameters, FLOPs, the weights' memory and the KV cache; the arithmetic of inference."""
    from ..drills import inference

    if model is not None and config is not None:
        raise typer.BadParameter(t("drill.infer.model_and_config"), param_hint="--config")
    sizes = inference.preset(model) if model is not None else inference.read_config(str(config)) if config else None
    kinds = (kind.value,) if kind is not None else None
    if sizes is not None and kind is not None:  # the one kind asked must fit the model: refused here, in one line
        inference.questions(0, 1, kinds, sizes)
    _generated(ctx, "counts", lambda s, n: inference.questions(s, n, kinds, sizes), seed, count, show_answers, fmt)


@app.command("masks", help=t("cli.drill.masks.help"), cls=HelpCommand)
def masks(
    ctx: typer.Context,
    seed: SeedOpt = None,
    count: Annotated[int, typer.Option("--count", help=t("cli.opt.count"), min=1, max=200)] = 9,
    show_answers: ShowOpt = False,
    fmt: FormatOpt = Format.rich,
) -> None:
    """One mask in every PyTorch convention."""
    from ..drills import masks as drill

    _generated(ctx, "masks", drill.questions, seed, count, show_answers, fmt)


def _bank(folders: list[Path] | None) -> Bank:
    from ..drills.bank import load

    return load(folders or ())


@app.command("concepts", help=t("cli.drill.concepts.help"), cls=HelpCommand)
def concepts(
    ctx: typer.Context,
    topic: Annotated[str | None, typer.Option("--topic", help=t("cli.opt.topic"), show_default=False)] = None,
    mode: ModeOpt = DrillMode.free,
    seed: SeedOpt = None,
    count: Annotated[int, typer.Option("--count", help=t("cli.opt.count"), min=1, max=200)] = 6,
    list_: Annotated[bool, typer.Option("--list", help=t("cli.opt.list"))] = False,
    bank: BankOpt = None,
    show_answers: ShowOpt = False,
    fmt: FormatOpt = Format.rich,
) -> None:
    """Why-questions from the concept bank, each with its chain of follow-ups."""
    from ..drills import concepts as drill

    loaded = _bank(bank)
    if list_:
        _list(environment(ctx), loaded, fmt)
        return
    s = _seed(seed)
    try:
        questions = drill.questions(loaded, seed=s, count=count, topic=topic, mode=mode.value)
    except KeyError:
        raise typer.BadParameter(t("drill.bad_topic", topic=topic, topics=", ".join(loaded.topics)),
                                 param_hint="--topic") from None
    if show_answers or fmt is Format.json:
        _out(environment(ctx), "concepts", questions, s, show_answers, fmt)
    else:
        _run(ctx, "concepts", questions, s, mode.value)


def _list(env: Env, bank: Bank, fmt: Format) -> None:
    from ..drills.concepts import listing

    doc = listing(bank)
    if fmt is Format.json:
        write_json(doc)
        return
    from ..render.drill import DrillView

    view = DrillView(console(env))
    view.line(t("drill.list.header", questions=plural("drill.count.questions", len(doc["questions"])),
                topics=plural("drill.list.topics", len(doc["topics"]))), "bold")
    for topic in doc["topics"]:
        view.line(topic, "bold", indent=2)
        for q in doc["questions"]:
            if q["topic"] == topic:
                view.bullet(f"{q['id']}: {q['question']}")


@app.command("interview", help=t("cli.drill.interview.help"), cls=HelpCommand)
def interview(
    ctx: typer.Context,
    minutes: Annotated[float, typer.Option("--minutes", help=t("cli.opt.minutes"), min=1, max=180)] = 15,
    seed: SeedOpt = None,
    mode: ModeOpt = DrillMode.free,
    bank: BankOpt = None,
    show_answers: ShowOpt = False,
    fmt: FormatOpt = Format.rich,
) -> None:
    """A timed mock interview, then a report: what was strong, what to review, an outline."""
    from ..drills import interview as mock

    loaded = _bank(bank)
    s = _seed(seed)
    p = mock.plan(s, loaded, mode.value)
    if show_answers or fmt is Format.json:
        if fmt is Format.json:
            write_json({"drill": "interview", "minutes": minutes, "answers": show_answers,
                                     **p.document(show_answers)})
        else:
            from ..render.drill import DrillView

            view = DrillView(console(environment(ctx)))
            view.line(t("drill.interview.calculation", command=p.document(False)["calculation"]["command"]), "bold")
            view.listing([q for _, qs in p.sections for q in qs], s, show_answers)
        return
    from ..drills.runs import interview as run
    from ..practice.terminal import answer_stream
    from ..render.drill import DrillView

    env = environment(ctx)
    stream = answer_stream(env.stdin)
    run(p, minutes=minutes, bank=loaded, stream=stream, view=DrillView(console(env)), store=store_path(env),
        report=lambda message: warn(t("cli.error", message=message)))
