"""``drill interview``: a timed mock interview, then a report.

The interview runs in the order an interviewer would go: a hand calculation
(one step of a bundled exercise, asked by the practice state machine itself,
:mod:`tutor.practice.machine`, in a loop of its own, :func:`_calculation`:
one try, as in an interview, where :func:`tutor.practice.session.drive`
would ask again after a wrong answer), two shape questions, two count
questions, one mask scenario (two or three questions), and a concept
question with its follow-ups.  The time is checked before every
question (a clock is passed in: tests use a fake one); when it is up the
interview stops there.  The report (:class:`Report`) says what was strong,
what to review -- the weakest topics first, each with the command that drills
it -- and gives a spoken-answer outline for the weakest topic, from the
concept bank's key points.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from ..base.messages import language
from ..practice.terminal import Lines
from ..store.recorder import why_unsaved
from . import counts, masks, shapes
from .bank import Bank
from .concepts import Mode, chain, to_question
from .driver import Answer, Answered, Reason, View, ask
from .record import Question
from .results import banks_of, command_for

if TYPE_CHECKING:
    from ..practice.session import View as QuizView
    from ..store import Recorder

#: The hand calculations an interview may start with: (exercise, step), each small enough for paper and each
#: a real calculation -- every entry combines several numbers: a matrix product (``scores``, ``head_output``) or
#: a softmax over a row (``weights``), never a step that rescales or copies its input entry by entry (``scaled``,
#: ``masked``: the masks section asks about masks).
CALCULATIONS = (("single-head-3x4", "scores"), ("single-head-dk4-2x4", "weights"), ("cross-attention-2x3", "scores"),
                ("two-head-dk1-3x4", "weights"), ("single-head-asym-3x4", "scores"))
SECTIONS = ("calculation", "shapes", "counts", "masks", "concepts")

#: The concept question whose key points outline a spoken answer for a topic that is not itself a concept topic.
OUTLINES = {
    ("calculation", "scores"): "why-scale", ("calculation", "scaled"): "why-scale",
    ("calculation", "masked"): "mask-combine", ("calculation", "weights"): "stable-softmax",
    ("shapes", "k_repeated"): "gqa", ("shapes", "v_repeated"): "gqa", ("shapes", "attn_mask"): "mask-combine",
    ("shapes", "key_padding_mask"): "mask-combine", ("shapes", "q_heads"): "why-heads", ("shapes", "merged"): "w-o-role",
    ("shapes", "output"): "w-o-role", ("shapes", "k_heads"): "gqa", ("shapes", "v_heads"): "gqa",
    ("counts", "params"): "heads-cost", ("counts", "flops"): "attention-cost",
    ("counts", "weights_memory"): "attention-cost", ("counts", "kv_cache"): "kv-cache-memory",
    ("masks", "causal_alignment"): "cache-causal", ("masks", "fully_masked"): "fully-masked-row",
    ("masks", "neg_1e9"): "mask-neg-1e9", ("masks", "query_padding"): "mask-combine",
}
DEFAULT_OUTLINE = {"shapes": "cross-attention-shapes", "masks": "mask-polarity", "counts": "kv-cache-memory",
                   "calculation": "why-scale"}


@dataclass(frozen=True)
class Plan:
    """What an interview asks: the hand-calculation step, then the questions of each section."""

    seed: int
    exercise: str
    step: str
    sections: tuple[tuple[str, tuple[Question, ...]], ...]

    def document(self, answers: bool) -> dict[str, Any]:
        """``--format json``: ``{"seed", "calculation": {"exercise", "step", "command"}, "sections":
        [{"section", "questions": [...]}]}`` (each question as :meth:`Question.document`)."""
        return {"seed": self.seed,
                "calculation": {"exercise": self.exercise, "step": self.step,
                                "command": f"attn-tutor practice {self.exercise} --steps {self.step}"},
                "sections": [{"section": name, "questions": [q.document(answers) for q in qs]}
                             for name, qs in self.sections]}


def plan(seed: int, bank: Bank, mode: Mode = "free") -> Plan:
    """The interview drawn with ``seed`` (the same seed, the same interview)."""
    rng = random.Random(seed)
    exercise, step = rng.choice(CALCULATIONS)
    shape_qs = shapes.questions(rng.randrange(2**31), 2)
    count_qs = counts.questions(rng.randrange(2**31), 2)
    mask_qs = masks.scenario_questions(masks.random_scenario(rng), rng, f"masks-{seed}-1")
    roots = list(bank.concepts)
    root = rng.choice(roots)
    concept_qs = [to_question(c, mode, rng, parent) for c, parent in chain(bank, root, set())]
    return Plan(seed, exercise, step, (("shapes", tuple(shape_qs)), ("counts", tuple(count_qs)),
                                       ("masks", tuple(mask_qs)), ("concepts", tuple(concept_qs))))


# --- the report -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Area:
    """One topic of the interview: its section, its topic, how many of its questions were right."""

    section: str
    topic: str
    right: int
    asked: int
    command: str


@dataclass(frozen=True)
class Report:
    """What the interview found: every topic asked, the strong ones, those to review (weakest first),
    and a spoken-answer outline (question, key points, one-line summary) for the weakest topic."""

    reason: Reason
    elapsed: float
    minutes: float
    areas: tuple[Area, ...]
    strong: tuple[Area, ...]
    review: tuple[Area, ...]
    outline: tuple[str, str, tuple[str, ...], str] | None  # (topic, question, key points, short answer)


def report(p: Plan, calc: Answered | None, answered: list[Answered], reason: Reason, elapsed: float, minutes: float,
           bank: Bank) -> Report:
    """The report of an interview: ``calc`` is the hand calculation's result (``None`` when not reached)."""
    tally: dict[tuple[str, str], list[int]] = {}
    if calc is not None and calc.outcome is not None:
        tally[("calculation", p.step)] = [int(calc.outcome == "correct"), 1]
    for a in answered:
        if a.outcome not in ("correct", "wrong", "shown"):
            continue
        t_ = tally.setdefault((a.question.drill, a.question.topic), [0, 0])
        t_[0] += a.outcome == "correct"
        t_[1] += 1
    areas = tuple(Area(section, topic, right, asked, _command(p, section, topic, banks_of(
                      a.question for a in answered if (a.question.drill, a.question.topic) == (section, topic))))
                  for (section, topic), (right, asked) in tally.items())
    strong = tuple(a for a in areas if a.right == a.asked)
    review = tuple(sorted((a for a in areas if a.right < a.asked), key=lambda a: (a.right / a.asked, -a.asked)))
    target = review[0] if review else None
    outline = _outline(target, answered, bank) if target is not None else None
    return Report(reason, elapsed, minutes, areas, strong, review, outline)


def _command(p: Plan, section: str, topic: str, banks: tuple[str, ...] = ()) -> str:
    if section == "calculation":
        return f"attn-tutor practice {p.exercise} --steps {topic}"
    return command_for(section, topic, banks)


def _outline(area: Area, answered: list[Answered], bank: Bank) -> tuple[str, str, tuple[str, ...], str] | None:
    qid = None
    if area.section == "concepts":
        asked = [a.question.id for a in answered if a.question.drill == "concepts" and a.question.topic == area.topic]
        qid = asked[0] if asked else next((c.id for c in bank.concepts if c.topic == area.topic), None)
    else:
        qid = OUTLINES.get((area.section, area.topic), DEFAULT_OUTLINE.get(area.section))
    try:
        c = bank.get(qid) if qid is not None else None
    except KeyError:
        c = None
    if c is None:
        return None
    q = c.q.in_language(language())
    return (area.topic, q.question, tuple(q.key_points), q.short_answer)


class InterviewView(View, Protocol):
    """What the mock interview shows its run on: a drill's view, and its own moments."""

    def quiz_renderer(self) -> QuizView: ...
    def interview_intro(self, minutes: float, p: Plan) -> None: ...
    def section(self, name: str) -> None: ...
    def report(self, r: Report, unsaved: int = 0) -> None: ...


# --- running it -------------------------------------------------------------------------------


def run(p: Plan, *, minutes: float, stream: TextIO, view: InterviewView, recorder: Recorder,
        bank: Bank, clock: Callable[[], float]) -> Report:
    """Run the interview ``p`` for ``minutes`` on ``stream``; returns its report (the caller shows it).

    Ctrl-C, ``quit``, the end of input and the end of the time stop the
    interview where it is; what was answered is in the report and the store.
    """
    start = clock()
    deadline = start + minutes * 60
    lines = Lines(stream, view.console, view.echo)
    answered: list[Answered] = []
    reason: Reason = "done"
    view.interview_intro(minutes, p)
    view.section("calculation")
    calc, reason = _calculation(p, lines=lines, view=view, recorder=recorder)
    for name, qs in p.sections:
        if reason != "done":
            break
        view.section(name)
        result = ask(qs, lines=lines, view=view, recorder=recorder, clock=clock, deadline=deadline)
        answered += [a for a in result.results if a.outcome is not None]
        reason = result.reason
    return report(p, calc, answered, reason, clock() - start, minutes, bank)


def _calculation(p: Plan, *, lines: Lines, view: InterviewView, recorder: Recorder) -> tuple[Answered, Reason]:
    """The hand-calculation step, asked by the practice state machine (:mod:`tutor.practice`); its answers
    are practice answers in the store.  One try, as in an interview: after a wrong answer (told what
    is wrong, and why when a known mistake explains it) the right matrix is shown and the interview
    goes on.  Returns how it went (``skip`` leaves it uncounted) and how the step ended: ``done``, or
    ``quit``, ``end``, ``interrupt``, which end the interview."""
    from ..exercise.catalog import resolve
    from ..practice import Command, EndOfInput, Event, Interrupt, Prompt, Summary, Wrong, handle, read_event, start
    from ..steps import solve
    from ..store.attempt import Attempt

    sol = solve(resolve(p.exercise))
    renderer = view.quiz_renderer()
    state, effects = start(sol, steps=(p.step,), head=0 if sol.exercise.num_heads > 1 else None)
    reason: Reason = "done"
    while True:
        prompt = None
        wrong = False
        for effect in effects:
            if isinstance(effect, Attempt):
                if not recorder.add(effect):
                    view.unsaved_warning(why_unsaved(recorder), lost=recorder.lost)
            elif isinstance(effect, Prompt):
                prompt = effect
            elif isinstance(effect, Summary):
                reason = effect.reason
            else:
                renderer.show(effect)
                wrong = wrong or isinstance(effect, Wrong)
        if state.done or prompt is None:
            break
        if wrong:  # one try: show the answer and move on
            state, effects = handle(state, Command("show"))
            continue
        event: Event
        try:
            line = lines.read(renderer.prompt(prompt))
            event = EndOfInput() if line is None else read_event(line)
        except KeyboardInterrupt:
            view.console.print()
            event = Interrupt()
        state, effects = handle(state, event)
    result = state.results[0]
    question = Question(drill="calculation", topic=p.step, id=f"{p.exercise}:{p.step}", kind="free",
                        prompt=p.exercise, answer=None, answer_text="")
    outcome: Answer | None = None
    if result.outcome == "correct":
        outcome = "wrong" if result.attempts else "correct"
    elif result.outcome == "shown":
        outcome = "wrong"
    elif result.outcome == "skipped":
        outcome = "skipped"
    return Answered(question, outcome), reason
