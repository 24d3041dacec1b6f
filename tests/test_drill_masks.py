"""`drill masks` without torch: masks worked out by hand in the test, typed answers, and the mistakes named
(torch parity of every mask and every fact: test_drill_masks_torch.py)."""

from __future__ import annotations

import random

import pytest

from tutor.base.errors import AnswerError
from tutor.drills import masks
from tutor.drills.record import grade, parse_mask

T, F = True, False


def test_causal_with_right_padding_by_hand():
    s = masks.Scenario("causal_padding", 2, 4, 4, "top_left", (4, 2), False, 1)
    assert s.key_padding_mask() == ((F, F, F, F), (F, F, T, T))
    assert s.allowed() == ((T, F, F, F), (T, T, F, F), (T, T, F, F), (T, T, F, F))
    assert s.fully_masked() == []


def test_causal_with_left_padding_leaves_rows_with_no_key():
    s = masks.Scenario("left_padding", 2, 4, 4, "top_left", (4, 2), True, 1)
    assert s.key_padding_mask()[1] == (T, T, F, F)
    assert s.allowed() == ((F, F, F, F), (F, F, F, F), (F, F, T, F), (F, F, T, T))
    assert s.fully_masked() == [0, 1]


def test_a_decode_step_is_bottom_right_aligned():
    s = masks.Scenario("cache", 1, 2, 5, "bottom_right", (5,), False, 0)
    assert s.allowed() == ((T, T, T, T, F), (T, T, T, T, T))
    assert s.causal_allowed("top_left") == ((T, F, F, F, F), (T, T, F, F, F))


def test_the_conventions_of_one_mask():
    allowed = ((T, F), (T, T))
    assert masks.as_convention(allowed, "sdpa_bool") == ((1.0, 0.0), (1.0, 1.0))
    assert masks.as_convention(allowed, "mha_bool") == ((0.0, 1.0), (0.0, 0.0))
    assert masks.as_convention(allowed, "additive") == ((0.0, float("-inf")), (0.0, 0.0))


@pytest.mark.parametrize(("text", "additive", "rows"), [
    ("1 0; 1 1", False, ((1.0, 0.0), (1.0, 1.0))), ("T F; t f", False, ((1.0, 0.0), (1.0, 0.0))),
    ("[[True, False], [True, True]]", False, ((1.0, 0.0), (1.0, 1.0))), ("true,false;false,true", False,
                                                                          ((1.0, 0.0), (0.0, 1.0))),
    ("0 -inf; 0 0", True, ((0.0, float("-inf")), (0.0, 0.0))), ("0 −∞; 0 0", True, ((0.0, float("-inf")), (0.0, 0.0))),
    ("0 -1e9", True, ((0.0, -1e9),)),
])
def test_masks_are_read_in_every_form(text, additive, rows):
    assert parse_mask(text, additive=additive) == rows


@pytest.mark.parametrize(("text", "additive"), [("1 2; 0 1", False), ("yes no", False), ("0 -inf; x 0", True),
                                                ("", False), ("1 0; 1", False)])
def test_unreadable_masks_are_refused_with_a_sentence(text, additive):
    with pytest.raises(AnswerError):
        parse_mask(text, additive=additive)


def _matrix_text(rows, additive=False) -> str:
    return "; ".join(" ".join(("-inf" if v == float("-inf") else str(int(v))) for v in row) for row in rows)


def test_inverted_polarity_is_named_for_the_convention_asked():
    s = masks.Scenario("causal_padding", 2, 3, 3, "top_left", (3, 2), False, 1)
    q = masks._matrix_question(s, "sdpa_bool", None, "", {}, "t")
    inverted = masks.as_convention(tuple(tuple(not a for a in row) for row in s.allowed()), "sdpa_bool")
    verdict = grade(q, _matrix_text(inverted))
    assert verdict.diagnosis == "drill.masks.inverted.sdpa_bool"
    assert "nn.MultiheadAttention's convention" in verdict.details[0]
    assert grade(q, _matrix_text(q.answer)).outcome == "correct"


def test_padding_forgotten_or_put_on_the_query_rows_is_named():
    s = masks.Scenario("causal_padding", 2, 3, 3, "top_left", (3, 2), False, 1)
    q = masks._matrix_question(s, "mha_bool", None, "", {}, "t")
    assert grade(q, "0 1 1; 0 0 1; 0 0 0").diagnosis == "drill.masks.no_padding"  # causal alone
    assert grade(q, "0 1 1; 0 0 1; 1 1 1").diagnosis == "drill.masks.query_rows"  # row 2 blocked instead of column 2


def test_top_left_for_a_decode_step_is_named():
    s = masks.Scenario("cache", 1, 2, 4, "bottom_right", (4,), False, 0)
    q = masks._matrix_question(s, "sdpa_bool", "causal_alignment", "", {}, "t")
    assert grade(q, "1 0 0 0; 1 1 0 0").diagnosis == "drill.masks.top_left"
    assert grade(q, "1 1 1 0; 1 1 1 1").outcome == "correct"


def test_a_finite_minus_1e9_in_the_additive_mask_is_named():
    s = masks.Scenario("causal_padding", 2, 2, 2, "top_left", (2, 2), False, 0)
    q = masks._matrix_question(s, "additive", None, "", {}, "t")
    assert grade(q, "0 -1e9; 0 0").diagnosis == "drill.masks.finite"
    assert grade(q, "1 0; 1 1").diagnosis == "drill.masks.bool_as_additive"
    assert grade(q, "0 -inf; 0 0").outcome == "correct"


@pytest.mark.parametrize("seed", range(40))
def test_every_question_accepts_its_answer(seed):
    for q in masks.questions(seed, 6):
        if q.kind == "matrix":
            assert grade(q, _matrix_text(q.answer)).outcome == "correct", q.id
            assert all(v.value != q.answer for v in q.variants)
        elif q.kind == "count":  # issue 23: how many keys a window's last query sees
            assert grade(q, str(q.answer)).outcome == "correct", q.id
            assert all(v.value != q.answer for v in q.variants)
        else:
            right = next(c for c in q.choices if c.right)
            assert grade(q, right.key).outcome == "correct"
            assert len({c.text for c in q.choices}) == len(q.choices)


def test_a_fully_masked_question_comes_with_every_scenario_that_has_such_rows():
    rng = random.Random(3)
    for n in range(30):
        s = masks.random_scenario(rng)
        qs = masks.scenario_questions(s, rng, f"s{n}")
        assert (s.fully_masked() != []) == any(q.topic == "fully_masked" for q in qs)


# --- rope trial F8: a window with sinks never covers every key ----------------------------------------------------


def test_a_drawn_window_with_sinks_never_covers_every_key():
    """W + S >= L makes the window-and-sinks mask the causal one (query L - 1 sees keys L - W .. L - 1 and the
    S sinks): a learner who forgets the window would be marked right.  Over many draws: W + S < L, and the
    answer's mask differs from the causal one and from the mask without sinks."""
    import random

    from tutor.drills.masks import random_window_scenario, window_rule

    seen = 0
    for seed in range(400):
        s = random_window_scenario(random.Random(seed))
        if s.kind != "window_sinks":
            continue
        seen += 1
        assert s.window is not None and s.window + s.sinks < s.L_q, s
        right = window_rule(s.L_q, s.L_k, 0, s.window, s.sinks, "right")
        causal = [[j <= i for j in range(s.L_k)] for i in range(s.L_q)]
        forgotten = window_rule(s.L_q, s.L_k, 0, s.window, s.sinks, "sinks_forgotten")
        as_lists = [[bool(right[i][j]) for j in range(s.L_k)] for i in range(s.L_q)]
        assert as_lists != causal and as_lists != [[bool(forgotten[i][j]) for j in range(s.L_k)] for i in range(s.L_q)]
    assert seen > 50
