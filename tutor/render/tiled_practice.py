"""What a learner reads during ``attn-tutor practice EXERCISE --tiled``: the effects of :mod:`tutor.flash.drill`.

Written to the :class:`rich.console.Console` passed in, as :mod:`tutor.render.quiz` writes a
practice session (it lends its primitives): verdicts in words and marks, not colour alone;
ASCII-only streams transliterated; numbers never cut (a long line folds).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console

from .. import practice as quiz
from ..answers import MIN_PLACES, Entry
from ..base.cells import pad, widest
from ..base.decimals import trimmed
from ..base.messages import t
from ..exact.numbers import Exact, NegInf, frac_text, notation
from ..exercise.record import Exercise
from ..flash import drill as tq
from ..flash.walk import TiledRow
from .quiz import QuizRenderer, rounded
from .text import decimal, is_plain, pretty

#: The commands at the prompt, as listed by ``help`` (``practice``'s, with what they do here).
COMMANDS = (("hint", "tiled.practice.help.hint"), ("shape", "tiled.practice.help.shape"),
            ("show", "practice.help.show"), ("skip", "practice.help.skip"), ("quit", "tiled.practice.help.quit"),
            ("help", "practice.help.help"))


class TiledPracticeRenderer:
    """Renders the effects of :mod:`tutor.flash.drill` (the practice machine's, over :class:`tq.Ask`) on one console."""

    def __init__(self, console: Console, ex: Exercise, precision: int = 4):
        self.q = QuizRenderer(console, precision)
        self.console = console
        self.ex = ex
        self.places = precision
        self.d_v = 0  # set by intro

    # -- primitives -------------------------------------------------------------------------
    def line(self, text: str, style: str = "", indent: int = 0) -> None:
        self.q.line(text, style, indent)

    def num(self, e: Exact) -> str:
        """``2√2``, ``exp(−√2) ≈ 0.2431``: the exact form, and its decimal when it says more."""
        exact = str(e)
        return pretty(exact) if is_plain(exact) else f"{pretty(exact)} ≈ {decimal(e.value(), self.places)}"

    def vec(self, es: Sequence[Exact]) -> str:
        return "[" + ", ".join(self.num(e) for e in es) + "]"

    def value(self, ask: tq.Ask) -> str:
        return self.vec(ask.right) if ask.vector else self.num(ask.right[0])

    def name(self, ask: tq.Ask) -> str:
        """``block 2 alpha``, ``o``: how a quantity is named where a learner reads it."""
        return ask.name if ask.block is None else t("tiled.practice.label", n=ask.block + 1, name=ask.name)

    # -- the session ------------------------------------------------------------------------
    def intro(self, row: TiledRow, chosen: bool) -> None:
        """The session's first lines: which row, why it, how to answer, and that nothing is recorded."""
        ex = self.ex
        head = t("tiled.row.head", head=row.head + 1) if ex.num_heads > 1 else ""
        query = ex.query_labels[row.row]
        self.line(t("tiled.practice.intro", query=query, head=head, title=ex.local_title, id=ex.id, block=row.block_size,
                    n=len(tq.asks(row))), "bold")
        if not chosen:
            key = "tiled.practice.row.default" if tq.rises(row) else "tiled.practice.row.flat"
            self.line(t(key, query=query))
        self.line(t("tiled.practice.given", scores=t("tiled.practice.scores.biased" if ex.has_bias
                                                     else "tiled.practice.scores.scaled")))
        for key in ("tiled.formula.m", "tiled.formula.alpha", "tiled.formula.l", "tiled.formula.acc",
                    "tiled.formula.end"):
            self.line(t(key), indent=2)
        self.d_v = len(row.o)
        self.line(t("tiled.practice.how", d_v=self.d_v))
        self.line(t("practice.commands"))
        self.line(t("tiled.practice.unrecorded"), "dim")

    def show(self, effect: quiz.Effect) -> None:
        """Render one effect (not :class:`quiz.Prompt`, which :meth:`prompt` turns into text)."""
        getattr(self, "on_" + type(effect).__name__.lower())(effect)

    def prompt(self, p: quiz.Prompt[tq.Ask]) -> str:
        return self.q.tx(t("practice.prompt", name=self.name(p.step), head="")) + " "

    def echo(self, prompt: str, line: str) -> None:
        self.q.echo(prompt, line)

    def on_blockstart(self, e: tq.BlockStart) -> None:
        ex, row = self.ex, e.row
        self.console.print()
        if e.block is None:  # the blocks are read: o and lse from the last block's m, l, acc
            last = row.blocks[-1]
            self.line(t("tiled.practice.end"), "bold")
            self.line(t("tiled.practice.block.last", m=self.num(last.m), l=self.num(last.l), acc=self.vec(last.acc)),
                      indent=2)
            return
        b = row.blocks[e.block]
        keys = t("list.sep").join(ex.key_labels[j] for j in b.keys)  # a list in prose: 、 in Chinese
        self.line(t("tiled.practice.block", n=e.block + 1, total=len(row.blocks), keys=keys), "bold")
        self.line(t("tiled.practice.block.scores", scores="; ".join(
            f"{ex.key_labels[j]}: {self.num(s)}" for j, s in zip(b.keys, b.scores))), indent=2)
        self.line(t("tiled.practice.block.values", rows="; ".join(
            f"{ex.key_labels[j]}: [{', '.join(pretty(frac_text(v)) for v in row.V[j])}]"
            for j in b.keys)), indent=2)
        if e.block:
            prev = row.blocks[e.block - 1]
            self.line(t("tiled.practice.block.carried", m=self.num(prev.m), l=self.num(prev.l), acc=self.vec(prev.acc)),
                      indent=2)

    def on_invalid(self, e: quiz.Invalid) -> None:
        self.line(t("practice.invalid", message=e.message))

    def on_correct(self, e: quiz.Correct[tq.Ask]) -> None:
        key = "practice.correct.marked" if e.attempt == 1 else "practice.correct.retry.marked"
        self.line(t(key, mark=self.q.right_mark, attempt=e.attempt), "bold green")

    def written(self, answer: Sequence[Entry], marked: Sequence[int]) -> str:
        """What was typed, the marked entries followed by the wrong-mark: ``[2.24, 4.24 ✗]``."""
        items = [notation(e.text) + (f" {self.q.wrong_mark}" if i in marked else "") for i, e in enumerate(answer)]
        return "[" + ", ".join(items) + "]" if len(answer) > 1 else items[0]

    def on_wrong(self, e: quiz.Wrong[tq.Ask]) -> None:
        ask, mark = e.step, self.q.wrong_mark
        answer, wrong = e.answer[0], [j for _, j in e.wrong or ()]  # one row: the entries by their column
        if ask.vector:
            self.line(t("practice.wrong.marked", wrong=len(wrong), total=len(ask.right), mark=mark), "bold red")
        else:
            self.line(t("tiled.practice.wrong.scalar.marked", mark=mark), "bold red")
        self.line(t("tiled.practice.yours", name=self.name(ask), written=self.written(answer, wrong)), indent=2)
        for way, cells in (("truncated", e.truncated), ("rounded_away", e.rounded_away)):
            if not cells:
                continue
            j = cells[0][1]
            v, entry = ask.right[j].value(), answer[j]
            self.line(t(f"tiled.practice.{way}", value=trimmed(v, (entry.places or 0) + 3), places=entry.places or 0,
                        rounded=rounded(v, entry.places or 0), written=entry.text))
        if e.coarse and not e.shown:
            self.line(t("tiled.practice.coarse.also", places=MIN_PLACES,
                        example=rounded(ask.right[e.coarse[0][1]].value(), MIN_PLACES)))
        if not self.q.diagnoses(e.shown) and set(e.truncated + e.rounded_away) != set(e.wrong or ()):
            self.line(t("tiled.practice.no_diagnosis"))
        self.line(t("tiled.practice.retry"), "dim")

    def on_coarse(self, e: quiz.Coarse[tq.Ask]) -> None:
        example = rounded(e.step.right[e.cells[0][1]].value(), MIN_PLACES)
        self.line(t("tiled.practice.coarse", places=MIN_PLACES, example=example))

    def on_hint(self, h: quiz.Hint[tq.Ask]) -> None:
        ask = h.step
        if h.level == 1:
            self.line(t("practice.hint.1", formula=h.formula), "bold")
            empty = ask.name == "lse" and isinstance(ask.right[0], NegInf)  # a row that may attend to no key
            self.line(t(f"tiled.practice.why.{ask.name}" + (".empty" if empty else "")), indent=3)
        elif h.level == 2:
            self.line(t("tiled.practice.hint.2" if ask.block is not None else "tiled.practice.hint.2.end"), "bold")
            approx = "" if all(is_plain(str(x)) for x in ask.right) else " ≈ " + (
                "[" + ", ".join(decimal(x.value(), self.places) for x in ask.right) + "]" if ask.vector
                else decimal(ask.right[0].value(), self.places))
            self.line(notation(h.work) + approx, indent=3)
        else:
            self.line(t("tiled.practice.hint.none", name=self.name(ask)))

    def on_shapeinfo(self, s: quiz.ShapeInfo[tq.Ask]) -> None:
        key = "tiled.practice.shape.vector" if s.step.vector else "tiled.practice.shape.scalar"
        self.line(t(key, name=s.step.name, d_v=len(s.step.right)))

    def on_reveal(self, r: quiz.Reveal[tq.Ask]) -> None:
        self.line(t("tiled.practice.reveal", name=self.name(r.step), value=self.value(r.step)), "bold")

    def on_skipped(self, s: quiz.Skipped[tq.Ask]) -> None:
        self.line(t("practice.skipped"), "dim")

    def on_help(self, h: quiz.Help) -> None:
        self.line(t("tiled.practice.how", d_v=self.d_v))
        self.line(t("practice.numbers"))
        for command, key in COMMANDS:
            self.line(t("practice.help.line", command=pad(command, 6), text=t(key)), indent=2)  # the command padded in cells

    def on_summary(self, s: quiz.Summary[tq.Ask]) -> None:
        results = s.results
        self.console.print()
        self.line(t(f"practice.end.{s.reason}"), "bold")
        self.line(t("tiled.practice.summary", right=s.count("correct"), total=s.asked, first=s.first,
                    shown=s.count("shown"), skipped=s.count("skipped")))
        cells = widest(self.q.tx(self.name(r.step)) for r in results)  # in cells: a name may be Chinese
        for n, r in enumerate(results, start=1):
            self.line(f"{n:>2}. {pad(self.q.tx(self.name(r.step)), cells)}  {r.status}", indent=2)
        self.line(t("tiled.practice.unrecorded"), "dim")
