"""``practice`` on a sliding window (rope trial F13): the masked step does not give the mask M, whose 0s and
−∞s the learner would only copy; its title says the rule to build it by, and the learner's own masked scores
are graded as before.  A causal mask is still given."""

from __future__ import annotations

import math

import pytest

from tutor import practice as quiz
from tutor.base.messages import use_language
from tutor.exercise.catalog import resolve
from tutor.steps import solve


def _window_rows(L: int, W: int, S: int) -> list[list[bool]]:
    """The sliding window with sinks, by its definition: query i sees key j iff i − W < j ≤ i or j < S (causal)."""
    return [[j <= i and (i - W < j or j < S) for j in range(L)] for i in range(L)]


@pytest.mark.parametrize(("name", "W", "S"), [("sliding-window-sinks-4x2", 2, 1)])
def test_the_window_mask_is_not_given_and_the_title_says_its_rule(name, W, S):
    sol = solve(resolve(name))
    step = sol.step("masked", 0)
    assert [str(i.name) for i in quiz.inputs_for(sol, step)] == ["scaled"]
    for lang, words in (("en", "M is yours to build"), ("zh", "M 由你自己写出")):
        with use_language(lang):
            present = quiz.Worked(sol, name).opening(quiz.begin(quiz.Worked(sol, name), (step,), quiz.Settings())[0],
                                                     None)[0]
            title = str(present.title)
        assert words in title and f"W = {W}" in title and f"S = {S}" in title
    # the answer the learner builds from the rule is the step's value
    allowed = _window_rows(4, W, S)
    scaled = sol.step("scaled", 0).value
    built = [[scaled[i][j] if allowed[i][j] else -math.inf for j in range(4)] for i in range(4)]
    assert [list(r) for r in step.value] == built  # the same floats: a sum with 0 or −∞


def test_a_causal_mask_is_still_given():
    sol = solve(resolve("two-head-causal-3x4"))
    assert [str(i.name) for i in quiz.inputs_for(sol, sol.step("masked", 0))] == ["scaled", "M"]


def test_the_piped_session_shows_no_m_and_takes_the_built_mask(cli):
    code, out, err = cli("practice", "sliding-window-sinks-4x2", "--steps", "masked", input="show\n")
    assert code == 0, err
    prompt = out.split("masked>")[0]
    assert "M [4×4]" not in prompt and "M is yours to build" in prompt and "scaled [4×4]" in prompt
