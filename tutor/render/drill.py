"""What a learner reads during ``attn-tutor drill …``, and the drills section of ``stats``.

Everything is written to the :class:`rich.console.Console` passed in, as in
:mod:`tutor.render.quiz`: a verdict is a word and a mark (``✓``/``✗``, ``ok``/``[x]``
on an ASCII stream), never colour alone; text is wrapped at the console's
width (an expression or a mask grid is never broken inside: it folds onto
the next line when it is wider than the terminal); text from a concept bank
file is escaped (:meth:`DrillView.tx`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from ..base.cells import pad, pad_left, widest, width
from ..base.messages import Text as Words
from ..base.messages import plural, t
from .quiz import QuizRenderer

if TYPE_CHECKING:
    from .. import practice as quiz
    from ..drills.driver import Run
    from ..drills.interview import Plan, Report
    from ..drills.record import Question, Verdict


class _InterviewQuiz(QuizRenderer):
    """The practice renderer inside an interview, where a step gets one try: no "type it again"
    after a wrong answer (the answer is shown next), and no practice summary (the report follows)."""

    _wrong = False

    def on_wrong(self, e: quiz.Wrong) -> None:
        self._wrong = True
        try:
            super().on_wrong(e)
        finally:
            self._wrong = False

    def line(self, text: Words, style: str = "", indent: int = 0) -> None:
        if self._wrong and str(text) == t("practice.retry"):
            return
        super().line(text, style, indent)


class DrillView:
    """Renders a drill run (questions, verdicts, summaries) and the interview's report on one console."""

    def __init__(self, console: Console):
        self.console = console
        self.quiz = QuizRenderer(console)
        self.right_mark = self.quiz.right_mark
        self.wrong_mark = self.quiz.wrong_mark

    # -- primitives -------------------------------------------------------------------------
    def tx(self, text: Words) -> str:
        """``text`` as this stream can show it (escaped; ASCII when the stream is not UTF-8)."""
        return self.quiz.tx(text)

    def line(self, text: Words, style: str = "", indent: int = 0, *, first: str = "") -> None:
        """A paragraph wrapped at words to the console's width, every line after ``indent`` spaces
        (the first after ``first`` instead, when given: a bullet, a letter); no trailing blanks.
        A word wider than the console is folded, never cut."""
        lead = first or " " * indent
        hang = " " * width(lead) if first else lead  # cells, as the terminal shows the lead
        room = max(self.console.width - width(lead), 8)
        body = Text(self.tx(text), style=style)
        for n, part in enumerate(body.wrap(self.console, room, overflow="fold")):
            part.rstrip()
            self.console.print(Text(lead if n == 0 else hang) + part, soft_wrap=True)

    def code(self, text: str, indent: int = 2) -> None:
        """One line of notation (a row of a mask grid), never wrapped: its columns stay aligned
        (a grid wider than the console runs on, and the terminal folds it)."""
        self.console.print(Text(" " * indent + self.tx(text)), soft_wrap=True)

    def bullet(self, text: Words) -> None:
        """One item of a list, its wrapped lines aligned after the bullet."""
        self.line(text, first="  " + self.tx("•") + " ")

    def echo(self, prompt: str, line: str) -> None:
        """A line read from a non-terminal stream, shown after its prompt."""
        self.quiz.echo(prompt, line)

    def quiz_renderer(self) -> _InterviewQuiz:
        """The renderer an interview's hand-calculation step uses (no practice summary of its own)."""
        return _InterviewQuiz(self.console)

    # -- a run ----------------------------------------------------------------------------------
    def intro(self, drill: str, total: int, seed: int, mode: str = "") -> None:
        """The first lines of a drill: what it asks, the seed that repeats it, how to answer."""
        key = "drill.intro.concepts.choice" if (drill, mode) == ("concepts", "choice") else f"drill.intro.{drill}"
        self.line(t(key, total=plural("drill.count.questions", total)), "bold")
        self.line(t("drill.seed", seed=seed, drill=drill))
        self.line(t("drill.commands"))

    def question(self, q: Question, number: int, total: int, left: float | None, *, follow_up: bool = False) -> None:
        """A question: its number, topic and (in a timed run) the minutes left, then its text and options."""
        self.console.print()
        clock = t("drill.left", minutes=_minutes(left)) if left is not None else ""
        head = t("drill.follow_up" if follow_up else "drill.question", number=number, total=total, drill=q.drill,
                 topic=q.topic, left=clock)
        self.line(head, "bold")
        for paragraph in q.prompt.split("\n"):
            self.line(paragraph, indent=2)
        for c in q.choices:
            self._option(c.key, c.text)
        self.line(t(f"drill.how.{self._how(q)}"), "dim", indent=2)

    def _how(self, q: Question) -> str:
        if q.kind == "matrix":
            return "additive" if q.json.get("additive") else "boolean"
        if q.kind == "count":
            from ..drills.record import count_tolerance

            if q.json.get("unit") in ("ms", "ratio") and count_tolerance(q):  # issue 23: a time, FLOPs per byte
                return f"count_{q.json['unit']}"
            return "count" if count_tolerance(q) else "count_exact"
        return q.kind

    def _option(self, key: str, text: str) -> None:
        self.line(text, first=f"    {key}) ")

    def prompt(self, q: Question) -> str:
        """The text before the cursor: ``scores> ``, ``answer> ``."""
        if q.drill == "shapes" and q.kind == "shape":  # the name of the tensor asked for
            return self.tx(t("drill.prompt", name=q.topic)) + " "
        return self.tx(t("drill.prompt.answer")) + " "

    def yes_no_prompt(self) -> str:
        return self.tx(t("drill.prompt.yes_no")) + " "

    def help(self, q: Question) -> None:
        self.line(t(f"drill.how.{self._how(q)}"))
        self.line(t("drill.commands"))

    def hint(self, q: Question, level: int) -> None:
        if level == 1 and q.hint:
            self.line(t("drill.hint", hint=q.hint))
        else:
            self.line(t("drill.hint.none"))

    def invalid(self, message: str, q: Question) -> None:
        """Typed text that is not an answer: nothing graded; say why, and how to answer."""
        self.line(t("drill.invalid.marked", mark=self.wrong_mark, message=message))
        self.line(t(f"drill.how.{self._how(q)}"), "dim", indent=2)

    def invalid_yes_no(self) -> None:
        self.line(t("drill.yes_no"))

    def verdict(self, q: Question, v: Verdict) -> None:
        """Right or wrong, in words and a mark; what was wrong; then the answer's explanation."""
        if v.outcome == "correct":
            self.line(t("drill.right.marked.message", mark=self.right_mark, message=v.message) if v.message
                      else t("drill.right.marked", mark=self.right_mark), "bold green")
        else:
            self.line(t("drill.wrong.marked", mark=self.wrong_mark, message=v.message), "bold red")
            for d in v.details:
                self.bullet(d)
        self._explain(q)

    def _explain(self, q: Question) -> None:
        grid: list[str] = []  # the rows of a mask grid, laid out together
        for line in (*q.explain, *q.after):
            if line.startswith("  "):  # notation: a row of a mask grid, aligned
                grid.append(line[2:])
                continue
            self.grid(grid)
            grid = []
            self.line(line, indent=2)
        self.grid(grid)

    def grid(self, rows: Sequence[str], indent: int = 4) -> None:
        """A mask grid (a header of column labels, then a labelled row per query; cells without spaces),
        each row on one line so that its columns stay aligned.  A grid wider than the console is split
        into groups of columns, each with the row labels, as the step tables are: no line is wider than
        the console (issue 20, E: ``drill masks`` at 20 columns)."""
        if not rows:
            return
        if indent + widest(self.tx(r) for r in rows) <= self.console.width:
            for r in rows:
                self.code(r, indent)
            return
        head, *body = [self.tx(r).split() for r in rows]  # [label, cell, ...] per row; the header has no label
        label = widest(b[0] for b in body)  # in cells: a token's label may be Chinese
        widths = [widest([head[j]] + [b[j + 1] for b in body]) for j in range(len(head))]
        groups: list[list[int]] = [[]]
        for j, w in enumerate(widths):  # a line: indent, label, 2 spaces, the cells 1 space apart
            if groups[-1] and indent + label + 2 + sum(widths[k] + 1 for k in groups[-1]) + w > self.console.width:
                groups.append([])
            groups[-1].append(j)
        for group in groups:
            self.code(" " * (label + 2) + " ".join(pad_left(head[j], widths[j]) for j in group), indent)
            for b in body:
                self.code(pad(b[0], label) + "  " + " ".join(pad_left(b[j + 1], widths[j]) for j in group), indent)

    def reveal(self, q: Question, *, shown: bool) -> None:
        """``show`` (the answer, counted as a miss) or ``skip`` (not counted; the answer is shown too)."""
        self.line(t("drill.shown" if shown else "drill.skipped"), "bold")
        if q.kind == "free":
            self.model_answer(q, ())
            return
        self.line(t("drill.answer", answer=q.answer_text), indent=2)
        self._explain(q)

    def key_points_intro(self, n: int) -> None:
        self.line(t("drill.key_points"), "bold")

    def key_point(self, i: int, n: int, text: str) -> None:
        self.line(t("drill.key_point", number=i, total=n, point=text), indent=2)

    def model_answer(self, q: Question, points: Sequence[bool]) -> None:
        """After a free-text answer: the points made, the model answer, the common wrong answers."""
        if points:
            self.line(t("drill.points_made", made=sum(points), total=len(points)), "bold")
        else:
            self.line(t("drill.key_points_were"), "bold")
            for p in q.key_points:
                self.bullet(p)
        self.line(t("drill.concepts.model"), "bold")
        self.line(q.model_answer, indent=2)
        if q.wrong_answers:
            self.line(t("drill.concepts.wrong"), "bold")
            for answer, why in q.wrong_answers:
                self.bullet(t("drill.concepts.wrong_answer", answer=answer, why=why))

    def unsaved_warning(self, reason: str, lost: bool = False) -> None:
        self.quiz.unsaved_warning(reason, lost)

    def summary(self, run: Run, unsaved: int = 0) -> None:
        """The end of a run: why it ended, the score, and each topic with a miss and the command that drills it."""
        from ..drills.results import banks_of, command_for

        self.console.print()
        self.line(t(f"drill.end.{run.reason}"), "bold")
        graded = run.answered
        right = sum(a.outcome == "correct" for a in graded)
        skipped = sum(a.outcome == "skipped" for a in run.results)
        self.line(t("drill.summary", right=right, graded=len(graded), skipped=skipped,
                    left=sum(a.outcome is None for a in run.results)))
        missed: dict[tuple[str, str], int] = {}
        for a in graded:
            if a.outcome != "correct":
                key = (a.question.drill, a.question.topic)
                missed[key] = missed.get(key, 0) + 1
        if missed:
            self.line(t("drill.review"), "bold")
            for (drill, topic), n in sorted(missed.items(), key=lambda kv: -kv[1]):
                banks = banks_of(a.question for a in graded if (a.question.drill, a.question.topic) == (drill, topic))
                self.bullet(t("drill.review.item", topic=topic, missed=n, command=command_for(drill, topic, banks)))
        if unsaved:
            self.line(plural("drill.unsaved", unsaved), "bold yellow")
        elif graded or skipped:
            self.line(t("practice.saved"), "dim")

    # -- listing (--show-answers, for people) -------------------------------------------------------
    def listing(self, questions: Sequence[Question], seed: int, answers: bool) -> None:
        """Every question (with its answer and explanation when ``answers``): a quiz sheet or its key."""
        self.line(t("drill.listing", total=plural("drill.count.questions", len(questions)), seed=seed), "bold")
        for n, q in enumerate(questions, start=1):
            self.console.print()
            self.line(t("drill.question", number=n, total=len(questions), drill=q.drill, topic=q.topic, left=""), "bold")
            for paragraph in q.prompt.split("\n"):
                self.line(paragraph, indent=2)
            for c in q.choices:
                self._option(c.key, c.text)
            if not answers:
                continue
            self.line(t("drill.answer", answer=q.answer_text), "bold", indent=2)
            if q.kind == "free":
                for p in q.key_points:
                    self.bullet(p)
                self.line(q.model_answer, indent=2)
            else:
                self._explain(q)

    # -- the interview --------------------------------------------------------------------------
    def interview_intro(self, minutes: float, p: Plan) -> None:
        self.line(t("drill.interview.intro", minutes=f"{minutes:g}"), "bold")
        self.line(t("drill.seed", seed=p.seed, drill="interview"))
        self.line(t("drill.interview.how"))

    def section(self, name: str) -> None:
        self.console.print()
        self.quiz.r.rule(t(f"drill.section.{name}"))

    def report(self, r: Report, unsaved: int = 0) -> None:
        """The interview's report: time, strong topics, topics to review with commands, an outline."""
        self.console.print()
        self.quiz.r.rule(t("drill.report.title"))
        self.line(t(f"drill.interview.end.{r.reason}"), "bold")
        self.line(t("drill.report.time", used=_minutes(r.elapsed), minutes=_minutes(r.minutes * 60)))
        if not r.areas:
            self.line(t("drill.report.nothing"))
            return
        right = sum(a.right for a in r.areas)
        asked = sum(a.asked for a in r.areas)
        self.line(t("drill.report.score", right=right, asked=asked))
        self.line(t("drill.report.strong"), "bold")
        if r.strong:
            for a in r.strong:
                self.bullet(t("drill.report.area", section=t(f"drill.section.{a.section}"), topic=a.topic,
                              right=a.right, asked=a.asked))
        else:
            self.line(t("drill.report.none_strong"), indent=2)
        self.line(t("drill.report.review"), "bold")
        if r.review:
            for a in r.review:
                self.bullet(t("drill.report.review_item", section=t(f"drill.section.{a.section}"), topic=a.topic,
                              right=a.right, asked=a.asked, command=a.command))
        else:
            self.line(t("drill.report.none_review"), indent=2)
        if r.outline is not None:
            topic, question, points, short = r.outline
            self.line(t("drill.report.outline", topic=topic), "bold")
            self.line(t("drill.report.outline_question", question=question), indent=2)
            for n, p in enumerate(points, start=1):
                self.line(p, first=f"    {n}. ")
            self.line(t("drill.report.outline_close", short=short), indent=2)
        if unsaved:
            self.line(plural("drill.unsaved", unsaved), "bold yellow")


def _minutes(seconds: float | None) -> str:
    """``12:05`` (minutes and seconds), never negative."""
    s = max(0, int(seconds or 0))
    return f"{s // 60}:{s % 60:02d}"
