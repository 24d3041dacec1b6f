"""One practice state machine, parameterised by what it asks (issue 19): a toy client asks two fractions;
the online softmax's drill is a client of the same machine, with the same effects.

The right values are written here by hand: 1/2 + 1/3 = 5/6, 2 · 3/4 = 3/2.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from tutor import practice
from tutor.exact.numbers import Exact, Rat
from tutor.exercise.catalog import resolve
from tutor.flash import drill as tq
from tutor.flash.walk import tiled
from tutor.practice import Command, Drill, EndOfInput, Interrupt, Settings, State, begin, handle, read_event


@dataclass(frozen=True)
class Sum:
    """A question of the toy client: one number, its exact value."""

    text: str
    value: Fraction

    @property
    def exact(self) -> tuple[tuple[Exact, ...], ...]:
        return ((Rat(self.value),),)

    @property
    def shape(self) -> tuple[int, int]:
        return (1, 1)


@dataclass(frozen=True)
class Toy(Drill[Sum]):
    """Supplies the hints and nothing else: shows nothing as a question begins, records nothing."""

    def formula(self, step: Sum) -> str:
        return step.text

    def worked(self, state: State[Sum]) -> tuple[tuple[int, int] | None, str]:
        return None, f"{state.step.text} = {state.step.value}"

    def miscount(self, step: Sum, found: int) -> str:
        return f"one number, not {found}"


QUESTIONS = (Sum("1/2 + 1/3", Fraction(5, 6)), Sum("2 * 3/4", Fraction(3, 2)))


def kinds(effects):
    return [type(e).__name__ for e in effects]


def run(*lines, mode="row"):
    state, effects = begin(Toy(), QUESTIONS, Settings(mode))
    out = list(effects)
    for line in lines:
        state, effects = handle(state, read_event(line))
        out += effects
    return state, out


def test_a_client_that_records_nothing_gets_no_attempt():
    state, effects = run("5/6", "1.5", "1.50")
    assert kinds(effects) == ["Prompt", "Correct", "Prompt", "Coarse", "Prompt", "Correct", "Summary"]
    assert state.done and [r.status for r in effects[-1].results] == ["right at the first try"] * 2


def test_the_commands_are_the_machines():
    state, effects = run("hint", "hint", "hint", "2", "show", "shape", "quit")
    hints = [e for e in effects if type(e).__name__ == "Hint"]
    assert [(h.level, h.formula, h.work) for h in hints] == [(1, "1/2 + 1/3", ""), (2, "", "1/2 + 1/3 = 5/6"),
                                                             (3, "", "")]
    assert kinds(effects)[7:] == ["Wrong", "Prompt", "Reveal", "Prompt", "ShapeInfo", "Prompt", "Summary"]
    summary = effects[-1]
    assert (summary.reason, summary.count("shown"), summary.asked) == ("quit", 1, 2)
    assert [r.status for r in summary.results] == ["shown (missed), 3 hints", "not answered"]
    assert summary.results[0].attempts == 1


def test_row_mode_refuses_a_miscounted_line_and_ends_on_ctrl_c_or_end_of_input():
    state, effects = begin(Toy(), QUESTIONS, Settings("row"))
    state, effects = handle(state, read_event("1 2"))
    assert kinds(effects) == ["Invalid", "Prompt"] and effects[0].message == "one number, not 2"
    for event in (Interrupt(), EndOfInput()):
        done, effects = handle(state, event)
        assert done.done and kinds(effects) == ["Summary"] and effects[0].results[0].seen


def test_the_tiled_drill_is_a_client_of_the_same_machine():
    assert tq.handle is practice.handle
    state, effects = tq.start(tiled(resolve("single-head-3x4"), 1)[0])
    assert isinstance(state, practice.State) and isinstance(state.drill, Drill)
    state, effects = handle(state, Command("skip"))
    assert all(isinstance(e, practice.Effect.__args__) for e in effects)  # type: ignore[attr-defined]
    assert kinds(effects) == ["Skipped", "Prompt"] and not any(isinstance(e, practice.Attempt) for e in effects)
