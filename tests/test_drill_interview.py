"""`drill interview`: the plan, the clock (a fake one: no test sleeps), the one-try hand calculation, the report."""

from __future__ import annotations

import io
import json
import sqlite3

import pytest

from tutor.drills import interview, runs
from tutor.drills.bank import load
from tutor.exercise.catalog import resolve
from tutor.render.console import make_console
from tutor.render.drill import DrillView
from tutor.steps import solve
from tutor.store import default_path

from .test_drill_cli import golden


class Clock:
    """A clock that moves only when told: ``tick`` seconds each time a line is read."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Timed(io.StringIO):
    """Piped answers, each taking ``seconds`` on ``clock``."""

    def __init__(self, text: str, clock: Clock, seconds: float):
        super().__init__(text)
        self.clock, self.seconds = clock, seconds

    def readline(self, *args):  # type: ignore[override]
        self.clock.now += self.seconds
        return super().readline(*args)


def right_answers(p: interview.Plan, *, wrong: frozenset[str] = frozenset()) -> list[str]:
    """Every answer of the interview right (free text: every key point made), except the sections in ``wrong``."""
    sol = solve(resolve(p.exercise))
    step = next(s for s in sol.steps if s.id == p.step and s.head in (None, 0))
    calc = "; ".join(" ".join(str(x) for x in row) for row in step.exact)  # the answer grammar
    out = ["0; 0" if "calculation" in wrong else calc]
    for name, qs in p.sections:
        for q in qs:
            if q.kind == "shape":
                out.append("1 1" if name in wrong else " ".join(str(v) for v in q.answer))
            elif q.kind == "count":
                out.append("1" if name in wrong else str(q.answer))
            elif q.kind == "matrix":
                out.append("1 1; 1 1" if name in wrong else "; ".join(
                    " ".join("-inf" if v == float("-inf") else str(int(v)) for v in row) for row in q.answer))
            elif q.kind == "choice":
                out.append(next(c.key for c in q.choices if c.right != (name in wrong)))
            else:
                out += ["my answer"] + (["n"] if name in wrong else ["y"]) * len(q.key_points)
    return out


@pytest.fixture
def run(home):
    """``run(p, answers, minutes=15, seconds=1.0) -> (report, text)``: plan ``p`` on piped ``answers``, each
    taking ``seconds`` on a fake clock, recorded in the progress store in ``home``."""

    def interview_run(p: interview.Plan, answers: list[str], *, minutes: float = 15, seconds: float = 1.0):
        clock = Clock()
        out = io.StringIO()
        view = DrillView(make_console(None, file=out, width=100))
        report = runs.interview(p, minutes=minutes, bank=load(), stream=Timed("\n".join(answers) + "\n", clock, seconds),
                                view=view, store=default_path(home), report=lambda m: None, clock=clock)
        return report, out.getvalue()

    return interview_run


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_all_right_is_all_strong_with_nothing_to_review(run, seed):
    p = interview.plan(seed, load())
    report, out = run(p, right_answers(p))
    assert report.reason == "done" and not report.review and report.outline is None
    assert {a.section for a in report.strong} == {"calculation", "shapes", "counts", "masks", "concepts"}
    assert "Nothing: every answer was right." in out and "Interview complete." in out


def test_the_weakest_topics_come_first_with_their_commands_and_an_outline(run):
    p = interview.plan(2, load())
    report, out = run(p, right_answers(p, wrong=frozenset({"counts", "calculation"})))
    assert {a.section for a in report.review} == {"counts", "calculation"}
    assert {a.section for a in report.strong} == {"shapes", "masks", "concepts"}
    commands = {a.section: a.command for a in report.review}
    assert commands["calculation"] == f"attn-tutor practice {p.exercise} --steps {p.step}"
    assert commands["counts"].startswith("attn-tutor drill counts --kind ")  # the kind missed (issue 23)
    topic, question, points, short = report.outline
    weakest = report.review[0]
    assert topic == weakest.topic
    expected = load().get(interview.OUTLINES.get((weakest.section, weakest.topic),
                                                  interview.DEFAULT_OUTLINE.get(weakest.section)))
    assert (question, points, short) == (expected.q.question, tuple(expected.q.key_points), expected.q.short_answer)
    assert "A spoken answer on" in out and weakest.command in " ".join(out.split())


def test_the_time_is_checked_before_each_question_and_ends_the_interview(run):
    """Each answer takes 2 minutes on the fake clock: a 5-minute interview stops after the third reading."""
    p = interview.plan(2, load())
    report, out = run(p, right_answers(p), minutes=5, seconds=120)
    assert report.reason == "time" and report.elapsed == 360
    assert "Time is up: interview ended." in out and "Time used: 6:00 of 5:00." in out
    assert sum(a.asked for a in report.areas) == 3  # the calculation and two shape questions


def test_the_minutes_left_are_shown_in_each_question(run):
    p = interview.plan(2, load())
    _, out = run(p, right_answers(p), minutes=15, seconds=30)
    assert "· 14:30 left" in out and "· 14:00 left" in out


def test_a_wrong_hand_calculation_is_shown_at_once_and_the_interview_goes_on(run, home):
    p = interview.plan(2, load())
    report, out = run(p, right_answers(p, wrong=frozenset({"calculation"})))
    assert "The answer:" in out and "Type the matrix again" not in out
    assert report.reason == "done"
    with sqlite3.connect(default_path(home)) as conn:
        practice = conn.execute("SELECT exercise, step, outcome FROM answers WHERE exercise NOT LIKE 'drill:%'").fetchall()
        sessions = conn.execute("SELECT exercise, mode FROM sessions").fetchall()
    assert practice == [(p.exercise, p.step, "wrong"), (p.exercise, p.step, "shown")]
    assert sessions == [("drill:interview", "interview")]


def test_quitting_ends_the_interview_with_its_report(run):
    p = interview.plan(2, load())
    report, out = run(p, right_answers(p)[:2] + ["quit"])
    assert report.reason == "quit" and sum(a.asked for a in report.areas) == 2
    assert "Interview ended." in out and "Report" in out


def test_end_of_input_during_the_calculation_reports_nothing_answered(run):
    p = interview.plan(2, load())
    report, out = run(p, [])
    assert report.reason == "end" and not report.areas and "Nothing was answered." in out


def test_a_mock_interview_from_the_terminal_as_a_learner_reads_it(cli, monkeypatch):
    """The whole interview, piped (the clock stands still: the golden file shows 15:00 left throughout)."""
    monkeypatch.setattr(runs, "monotonic", lambda: 500.0)
    p = interview.plan(2, load())
    answers = right_answers(p, wrong=frozenset({"masks"}))
    code, out, err = cli("drill", "interview", "--seed", 2, input="\n".join(answers) + "\n")
    assert (code, err) == (0, "")
    golden("drill-interview-2.txt", out)


def test_the_plan_is_the_same_for_the_same_seed():
    a, b = interview.plan(5, load()), interview.plan(5, load())
    assert json.dumps(a.document(True)) == json.dumps(b.document(True))
    assert json.dumps(a.document(True)) != json.dumps(interview.plan(6, load()).document(True))
