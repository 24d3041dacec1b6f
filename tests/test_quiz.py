"""The practice state machine, event by event, with no I/O.

Expected values are hand calculations written here (the classic example:
Q = K = V = [[1, 1], [2, 2], [2, 2]], scores = [[2, 4, 4], [4, 8, 8], [4, 8, 8]],
scaled = scores / √2), never the engine's own output read back.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tutor import practice as quiz
from tutor.exercise.catalog import resolve
from tutor.practice import (
    Answer,
    Command,
    EndOfInput,
    Interrupt,
    Prompt,
    Settings,
    Summary,
    Wrong,
    handle,
    read_event,
    start,
)
from tutor.steps import solve, worked_entry
from tutor.store.attempt import Attempt

R2 = math.sqrt(2)
Q = [[1, 1], [2, 2], [2, 2]]
SCORES = [[2, 4, 4], [4, 8, 8], [4, 8, 8]]
SCALED = [[s / R2 for s in row] for row in SCORES]


def dec(m, places=2):
    """A matrix typed with ``places`` decimals, one line."""
    return "; ".join(" ".join(f"{v:.{places}f}" for v in row) for row in m)


def classic():
    return solve(resolve("single-head-3x4"))


def causal():
    return solve(resolve("two-head-causal-3x4"))


def kinds(effects):
    return [type(e).__name__ for e in effects]


def run(state, *lines):
    """Feed typed lines; return the final state and every effect, in order."""
    out = []
    for line in lines:
        state, effects = handle(state, read_event(line))
        out += effects
    return state, out


def softmax(row):
    m = max(v for v in row if v != -math.inf)
    e = [0.0 if v == -math.inf else math.exp(v - m) for v in row]
    return [x / sum(e) for x in e]


# --- events -----------------------------------------------------------------------------


@pytest.mark.parametrize("line, event", [
    ("hint", Command("hint")), ("  SHOW ", Command("show")), ("skip", Command("skip")), ("quit", Command("quit")),
    ("shape", Command("shape")), ("help", Command("help")), ("1 1; 2 2", Answer("1 1; 2 2")), ("", Answer("")),
    ("e", Answer("e")), ("hints", Answer("hints")), ("1 2\r\n", Answer("1 2")),
])
def test_read_event(line, event):
    assert read_event(line) == event


# --- the walk ----------------------------------------------------------------------------


def test_start_presents_the_first_step_with_its_inputs_and_no_result_shape():
    state, effects = start(classic())
    assert kinds(effects) == ["Present", "Prompt"]
    present = effects[0]
    assert present.step.id == "q" and (present.number, present.total) == (1, 7)
    assert [i.name for i in present.inputs] == ["X", "W_Q"]
    assert present.inputs[0].exact == (("1", "0", "1", "0"), ("0", "2", "0", "2"), ("1", "1", "1", "1"))
    assert present.inputs[1].shape == (4, 2)
    assert [s.id for s in state.steps] == ["q", "k", "v", "scores", "scaled", "weights", "head_output"]


def test_each_step_shows_what_it_is_computed_from():
    sol = causal()
    names = {(s.id, s.head): [i.name for i in quiz.inputs_for(sol, s)] for s in sol.steps}
    assert names["q", 1] == ["X", "W_Q"]
    assert names["scores", 0] == ["Q", "K"]
    assert names["scaled", 0] == ["scores"]
    assert names["masked", 1] == ["scaled", "M"]
    assert names["weights", 0] == ["masked"]
    assert names["head_output", 1] == ["weights", "V"]
    assert names["concat", None] == ["head_1", "head_2"]
    assert names["output", None] == ["concat", "W_O"]
    # the mask as a matrix: causal, 0 where key j <= query i
    m = quiz.inputs_for(sol, sol.step("masked", 0))[1]
    assert m.exact == (("0", "-inf", "-inf"), ("0", "0", "-inf"), ("0", "0", "0"))
    # scores uses the values the learner computed: Q and K of that head
    q, k = quiz.inputs_for(classic(), classic().step("scores", 0))
    assert q.exact == k.exact == (("1", "1"), ("2", "2"), ("2", "2"))


def test_right_answer_is_recorded_before_the_verdict_then_the_next_step():
    state, _ = start(classic())
    state, effects = handle(state, Answer("1 1; 2 2; 2 2"))
    assert kinds(effects) == ["Attempt", "Correct", "Present", "Prompt"]
    record = effects[0]
    assert (record.exercise, record.step, record.head, record.outcome, record.attempt, record.hints) == (
        "single-head-3x4", "q", 0, "correct", 1, 0)
    assert record.at is None  # stamped by the store's Recorder, not by the pure drill
    assert record.answer == "1 1; 2 2; 2 2"
    assert effects[2].step.id == "k" and effects[2].number == 2


def test_bracketed_and_comma_forms_are_answers():
    state, _ = start(classic(), steps=["q", "k"])
    state, effects = run(state, "[[1,1],[2,2],[2,2]]", "[1, 1], [2, 2], [2, 2]")
    assert kinds(effects).count("Correct") == 2 and state.done


def test_forgetting_sqrt_dk_is_named():
    state, _ = start(classic(), steps=["scaled"])
    state, effects = handle(state, Answer("2 4 4; 4 8 8; 4 8 8"))
    assert kinds(effects) == ["Attempt", "Wrong", "Prompt"]
    wrong = effects[1]
    assert wrong.wrong == tuple((i, j) for i in range(3) for j in range(3))  # every entry is off by √2
    assert wrong.diagnoses[0].key == "no_scaling"
    assert "forgot to divide by √d_k" in wrong.diagnoses[0].message
    assert effects[0].outcome == "wrong" and effects[0].diagnosis == "no_scaling"
    assert effects[0].diagnoses == tuple(d.key for d in wrong.diagnoses)  # every key that matched, not the messages
    # then the retry is right, at try 2
    state, effects = handle(state, Answer(dec(SCALED)))
    assert kinds(effects) == ["Attempt", "Correct", "Summary"]
    assert effects[0].attempt == 2 and effects[1].attempt == 2
    assert state.results[0].outcome == "correct" and state.results[0].attempts == 1
    assert state.results[0].diagnoses == ("no_scaling",)


def test_one_wrong_entry_is_pointed_at():
    state, _ = start(classic(), steps=["scores"])
    state, effects = handle(state, Answer("2 4 4; 4 8 8; 4 8 9"))
    wrong = effects[1]
    assert wrong.wrong == ((2, 2),)
    assert wrong.diagnoses[0].key == "single_entry"
    assert "you wrote 9" in wrong.diagnoses[0].message


def test_wrong_shape_is_graded_and_a_transpose_is_named():
    state, _ = start(classic(), steps=["q"])
    state, effects = handle(state, Answer("1 2 2; 1 2 2"))  # Qᵀ
    wrong = effects[1]
    assert wrong.wrong is None
    assert [d.key for d in wrong.diagnoses] == ["transposed"]
    assert state.attempts == 1


def test_unparseable_text_is_not_an_attempt():
    state, _ = start(classic(), steps=["q"])
    after, effects = handle(state, Answer("1 1; 2 2; 2 x"))
    assert kinds(effects) == ["Invalid", "Prompt"]
    assert 'row 3, entry 2: unknown name "x"' in effects[0].message
    assert after == state
    after, effects = handle(state, Answer("1 1; 2 2; 2"))
    assert effects[0].message == "row 3 has 1 entry, but row 1 has 2"


def test_blank_line_alone_asks_again():
    state, _ = start(classic(), steps=["q"])
    after, effects = handle(state, Answer("   "))
    assert kinds(effects) == ["Prompt"] and after == state


# --- row by row -------------------------------------------------------------------------


def test_row_by_row_ends_at_the_step_s_last_row():
    """Issue 11: the third row of a 3-row matrix is graded at once -- no "Q row 4>" prompt."""
    state, _ = start(classic(), steps=["q"])
    state, effects = handle(state, Answer("1 1"))
    assert kinds(effects) == ["RowByRow", "Prompt"] and effects[1].row == 2
    state, effects = handle(state, Answer("2 2"))
    assert kinds(effects) == ["Prompt"] and effects[0].row == 3
    state, effects = handle(state, Answer("2 2 2"))
    assert kinds(effects) == ["Invalid", "Prompt"]
    assert effects[0].message == "row 3 has 3 entries, but row 1 has 2"
    state, effects = handle(state, Answer("2 x"))
    assert str(effects[0].message).startswith('row 3: entry 2: unknown name "x"')
    state, effects = handle(state, Answer("2 2"))
    assert kinds(effects) == ["Attempt", "Correct", "Summary"]
    assert effects[0].answer == "1, 1; 2, 2; 2, 2"


def test_an_empty_line_ends_row_by_row_early_with_a_wrong_shape():
    state, _ = start(classic(), steps=["q"])
    state, effects = run(state, "1 1", "2 2", "")
    assert kinds(effects)[-3:] == ["Attempt", "Wrong", "Prompt"]
    assert effects[-2].wrong is None  # [2×2], not the step's [3×2]


def test_pasted_bracket_matrix_over_lines_ends_itself():
    state, _ = start(classic(), steps=["q"])
    state, effects = run(state, "[[1, 1],", " [2, 2],", " [2, 2]]")
    assert kinds(effects)[-3:] == ["Attempt", "Correct", "Summary"]


def test_end_of_input_grades_the_rows_already_typed():
    state, _ = start(classic(), steps=["q", "k"])
    state, effects = run(state, "1 1", "2 2")
    state, effects = handle(state, EndOfInput())
    assert kinds(effects) == ["Attempt", "Wrong", "Summary"]  # two rows of three: the shape is wrong
    assert effects[-1].reason == "end"
    assert [(r.outcome, r.attempts, r.seen) for r in effects[-1].results] == [(None, 1, True), (None, 0, False)]


# --- commands -----------------------------------------------------------------------------


def test_hints_are_graded_formula_then_one_entry_then_no_more():
    state, _ = start(classic(), steps=["scores"])
    state, effects = handle(state, Command("hint"))
    assert kinds(effects) == ["Hint", "Prompt"]
    assert effects[0].level == 1 and effects[0].formula == "scores = Q·Kᵀ"
    state, effects = handle(state, Command("hint"))
    # the first entry: q_t1 · k_t1 = 1·1 + 1·1 = 2
    assert effects[0].level == 2 and effects[0].cell == (0, 0)
    assert effects[0].work == "scores[t1, t1] = Q[t1, :]·K[t1, :] = 1·1 + 1·1 = 2"
    state, effects = handle(state, Command("hint"))
    assert effects[0].level == 3
    state, effects = handle(state, Command("show"))
    assert effects[0] == Attempt("single-head-3x4", "scores", 0, "shown", 1, 3,  # the store's own record
                                 family="single-head")


def test_the_second_hint_works_out_the_first_wrong_entry():
    state, _ = start(classic(), steps=["scores"])
    state, effects = run(state, "2 4 4; 4 8 8; 4 7 8", "hint", "hint")
    # scores[t3, t2] = q_t3 · k_t2 = 2·2 + 2·2 = 8
    assert effects[-2].work == "scores[t3, t2] = Q[t3, :]·K[t2, :] = 2·2 + 2·2 = 8"
    assert state.hints == 2


def test_shape_reveals_only_the_shape():
    state, _ = start(classic(), steps=["scores"])
    after, effects = handle(state, Command("shape"))
    assert kinds(effects) == ["ShapeInfo", "Prompt"] and effects[0].step.shape == (3, 3)
    assert after == state


def test_show_reveals_records_a_miss_and_moves_on():
    state, _ = start(classic(), steps=["q", "k"])
    state, effects = handle(state, Command("show"))
    assert kinds(effects) == ["Attempt", "Reveal", "Present", "Prompt"]
    assert effects[0].outcome == "shown"
    assert state.results[0].outcome == "shown"


def test_skip_records_and_moves_on():
    state, _ = start(classic(), steps=["q", "k"])
    state, effects = handle(state, Command("skip"))
    assert kinds(effects) == ["Attempt", "Skipped", "Present", "Prompt"]
    assert effects[0].outcome == "skipped"


def test_quit_summarises_every_step():
    state, _ = start(classic())
    state, effects = run(state, "1 1; 2 2; 2 2", "skip", "quit")
    assert kinds(effects)[-1] == "Summary"
    summary = effects[-1]
    assert summary.reason == "quit"
    assert [r.outcome for r in summary.results] == ["correct", "skipped", None, None, None, None, None]
    assert state.done
    assert handle(state, Answer("1")) == (state, [])


def test_interrupt_drops_a_half_typed_matrix():
    state, _ = start(classic(), steps=["q"])
    state, _ = handle(state, Answer("1 1"))
    state, effects = handle(state, Interrupt())
    assert kinds(effects) == ["Summary"] and effects[0].reason == "interrupt"
    assert effects[0].results[0].outcome is None


def test_help_lists_commands_without_moving():
    state, _ = start(classic(), steps=["q"])
    after, effects = handle(state, Command("help"))
    assert kinds(effects) == ["Help", "Prompt"] and after == state


def test_no_steps_is_an_immediate_summary():
    state, effects = start(classic(), steps=["concat"])
    assert state.done and kinds(effects) == ["Summary"]


# --- grading -----------------------------------------------------------------------------------


def test_two_decimals_are_right_and_one_decimal_is_neither_right_nor_wrong():
    sol = classic()
    state, _ = start(sol, steps=["scaled"])
    after, effects = handle(state, Answer(dec(SCALED, 1)))  # 1.4 claims [1.35, 1.45], which holds 1.4142
    assert kinds(effects) == ["Coarse", "Prompt"]  # no Attempt: nothing recorded, not a wrong try
    assert effects[0].cells == tuple((i, j) for i in range(3) for j in range(3)) and after.attempts == 0
    _, effects = handle(state, Answer(dec(SCALED, 2)))
    assert kinds(effects)[1] == "Correct"
    loose, _ = start(sol, Settings(tolerance=0.05), steps=["scaled"])  # --tolerance: no places asked for
    _, effects = handle(loose, Answer(dec(SCALED, 1)))
    assert kinds(effects)[1] == "Correct"


def test_exact_forms_are_accepted_and_must_be_exact():
    sol = classic()
    state, _ = start(sol, steps=["scaled", "weights"])
    state, effects = handle(state, Answer("sqrt(2) 2*sqrt(2) 4/sqrt(2); 2*√2 4*sqrt(2) 8/sqrt(2); 2*sqrt(2) 5.66 5.66"))
    assert kinds(effects)[1] == "Correct"
    # weights row t1: w0 = 1/(1 + 2e^√2), w1 = w2 = (1 - w0)/2
    w0 = 1 / (1 + 2 * math.exp(R2))
    w1 = (1 - w0) / 2
    w_rest = softmax([2 * R2, 4 * R2, 4 * R2])
    rows = [f"1/(1 + 2*exp(sqrt(2))) {w1:.3f} {w1:.3f}"] + [" ".join(f"{v:.2f}" for v in w_rest)] * 2
    state, effects = handle(state, Answer("; ".join(rows)))
    assert kinds(effects)[1] == "Correct"


def test_an_exact_entry_near_the_value_is_wrong_and_explained():
    # scaled[t1, t2] = 2√2 ≈ 2.8284: "283/100" is exact, so it claims exactly 2.83
    sol = classic()
    state, _ = start(sol, Settings(tolerance=0.2), steps=["scaled"])
    _, effects = handle(state, Answer("1.41 283/100 2.83; 2.83 5.66 5.66; 2.83 5.66 5.66"))
    wrong = effects[1]
    assert wrong.wrong == ((0, 1),) and wrong.inexact == ((0, 1),)


def test_an_integer_for_a_value_that_is_not_one_is_wrong_as_in_check():
    # scaled[t1, t2] = 2√2 ≈ 2.83: a whole number is an exact form (tutor.answers.grading), in practice as in
    # check: "3" and "2" are both wrong (not "give more decimals"); a coarse decimal still gets that
    state, _ = start(classic(), steps=["scaled"])
    for whole in ("3", "2"):
        _, effects = handle(state, Answer(f"1.41 {whole} 2.83; 2.83 5.66 5.66; 2.83 5.66 5.66"))
        assert kinds(effects) == ["Attempt", "Wrong", "Prompt"] and effects[1].wrong == ((0, 1),)
    _, effects = handle(state, Answer("1.41 2.8 2.83; 2.83 5.66 5.66; 2.83 5.66 5.66"))
    assert kinds(effects) == ["Coarse", "Prompt"] and effects[0].cells == ((0, 1),)


def test_masked_scores_take_minus_inf():
    sol = causal()
    scaled = [[v for v in row] for row in sol.step("scaled", 0).value]
    typed = "; ".join(" ".join("-inf" if j > i else f"{scaled[i][j]:.2f}" for j in range(3)) for i in range(3))
    state, _ = start(sol, steps=["masked"], head=0)
    _, effects = handle(state, Answer(typed))
    assert kinds(effects)[1] == "Correct"
    zeroed = typed.replace("-inf", "0")
    _, effects = handle(state, Answer(zeroed))
    assert effects[1].diagnoses[0].key == "mask_zero"


# --- entry mode ------------------------------------------------------------------------------------


def test_entry_mode_asks_each_entry_then_only_the_wrong_ones():
    state, effects = start(classic(), Settings(mode="entry"), steps=["q"])
    assert effects[-1].cell == (0, 0)
    state, effects = run(state, "1", "1", "2", "x")
    assert kinds(effects)[-2:] == ["Invalid", "Prompt"]
    assert str(effects[-2].message).startswith('entry (t2, d2): unknown name "x"')
    assert effects[-1].cell == (1, 1)
    state, effects = run(state, "2", "2", "3")
    wrong = next(e for e in effects if isinstance(e, Wrong))
    assert wrong.wrong == ((2, 1),) and wrong.retry == ((2, 1),)
    assert effects[-1].cell == (2, 1)
    # the hint works out the entry being asked: Q[t3, d2] = 1·0 + 1·0 + 1·1 + 1·1 = 2
    state, effects = handle(state, Command("hint"))
    state, effects = handle(state, Command("hint"))
    assert effects[0].work == "Q[t3, d2] = X[t3, :]·W_Q[:, d2] = 1·0 + 1·0 + 1·1 + 1·1 = 2"
    state, effects = handle(state, Answer("2"))
    assert kinds(effects) == ["Attempt", "Correct", "Summary"]
    assert effects[0].answer == "1, 1; 2, 2; 2, 2" and effects[0].attempt == 2


# --- one entry worked out, for every kind of step ---------------------------------------------------


def test_worked_entries_by_hand():
    sol = classic()
    w = worked_entry
    assert w(sol, sol.step("scaled", 0), 0, 1) == "scaled[t1, t2] = scores[t1, t2] / sqrt(2) = 4 / sqrt(2) = 2*sqrt(2) ≈ 2.8284"
    e1, e2 = math.exp(R2), math.exp(2 * R2)
    w0 = e1 / (e1 + 2 * e2)
    assert w(sol, sol.step("weights", 0), 0, 0) == (
        "weights[t1, t1] = exp(scaled[t1, t1]) / Σ_k exp(scaled[t1, k]) = exp(1.4142) / (exp(1.4142) + exp(2.8284)"
        f" + exp(2.8284)) = {e1:.4f} / ({e1:.4f} + {e2:.4f} + {e2:.4f}) ≈ {w0:.4f}")
    w1 = (1 - w0) / 2
    out = w0 * 1 + w1 * 2 + w1 * 2
    assert w(sol, sol.step("head_output", 0), 0, 0) == (
        f"head_1[t1, d1] = weights[t1, :]·V[:, d1] = {w0:.6f}·1 + {w1:.6f}·2 + {w1:.6f}·2 ≈ {out:.4f}")  # operands at 6
    c = causal()
    assert w(c, c.step("masked", 0), 0, 2) == "masked[t1, t3] = scaled[t1, t3] + (-inf) = -inf  (query t1 may not attend to key t3)"
    assert w(c, c.step("weights", 1), 0, 1).endswith("= 0  (query t1 may not attend to key t2)")
    # the first query sees only itself: weight 1, output row = V's first row; concat column h2.d1 is head_2's d1
    assert w(c, c.step("concat", None), 0, 2) == "concat[t1, h2.d1] = head_2[t1, d1] = 1"
    # W_O is the identity: output[t1, o1] = concat[t1, :]·e_1 = 1
    assert w(c, c.step("output", None), 0, 0) == "output[t1, o1] = concat[t1, :]·W_O[:, o1] = 1·1 + 0·0 + 1·0 + 0·0 = 1"


# --- never stuck, never crashing -------------------------------------------------------------------

LINES = st.one_of(
    st.sampled_from(["hint", "shape", "show", "skip", "help", "", "1 1; 2 2; 2 2", "1 1", "2 2", "[[1, 1],",
                     "2 4 4; 4 8 8; 4 8 8", "-inf", "sqrt(2)", "1/0", "((", "]]", "inf -inf; 1 1; 2 2", "1",
                     "1 2 3 4 5 6 7", "1; 2; 3; 4", "1e300 -1e300; 0 0; 0 0"]),
    st.text(max_size=30),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(LINES, max_size=25), st.sampled_from(["matrix", "entry"]), st.booleans())
def test_any_input_keeps_a_consistent_state(lines, mode, interrupt):
    sol = classic()
    state, effects = start(sol, Settings(mode=mode), steps=["q", "scores", "scaled"])
    for line in lines:
        state, effects = handle(state, read_event(line))
        assert all(isinstance(e, quiz.Effect.__args__) for e in effects)  # type: ignore[attr-defined]
        if state.done:
            assert isinstance(effects[-1], Summary)
            break
        assert isinstance(effects[-1], Prompt)
        assert 0 <= state.index < len(state.steps)
    state, effects = handle(state, Interrupt() if interrupt else EndOfInput())
    assert state.done
    if effects:
        assert isinstance(effects[-1], Summary)
        assert len(effects[-1].results) == 3


# --- entries a mask fixes are exact: no tolerance ----------------------------------------------------
# Head 1 of the causal exercise, by hand: Q1 = X·W_Q[:, 2:4] = [[0, 2], [4, 0], [2, 2]],
# K1 = X·W_K[:, 2:4] = [[2, 0], [0, 4], [2, 2]], scores1 = Q1·K1ᵀ = [[0, 8, 4], [8, 0, 8], [4, 8, 8]],
# masked1 = scores1 / √2 with -inf above the diagonal = [[0, -inf, -inf], [4√2, 0, -inf], [2√2, 4√2, 4√2]].

E = math.exp
W1_T2 = [E(4 * R2) / (E(4 * R2) + 1), 1 / (E(4 * R2) + 1), 0.0]  # ≈ 0.9965, 0.0035, 0
W1_T3 = softmax([2 * R2, 4 * R2, 4 * R2])  # ≈ 0.0287, 0.4856, 0.4856


def test_a_weight_on_a_masked_key_must_be_exactly_zero():
    sol = causal()
    state, _ = start(sol, steps=["weights"], head=1)
    # the mask-as-zero answer (softmax of [0, 0, 0] and [4√2, 0, 0]): [t2, t3] is 0.0035, within
    # the tolerance of the right 0, but key t3 is masked for query t2
    typed = "0.3333 0.3333 0.3333; 0.9931 0.0035 0.0035; 0.0287 0.4856 0.4856"
    _, effects = handle(state, Answer(typed))
    wrong = effects[1]
    assert wrong.wrong == ((0, 0), (0, 1), (0, 2), (1, 0), (1, 2))  # 0.9931 claims [0.99305, 0.99315], not 0.9965
    assert wrong.blocked == ((1, 2),)  # the masked cell within 0.005 of its 0
    assert wrong.inexact == ()
    assert [d.key for d in wrong.diagnoses] == ["mask_zero"]
    # a tiny weight on a masked key is wrong even when everything else is right
    t3 = " ".join(f"{v:.4f}" for v in W1_T3)
    _, effects = handle(state, Answer(f"1 0 0; {W1_T2[0]:.4f} {W1_T2[1]:.4f} 0.004; {t3}"))
    assert effects[1].wrong == ((1, 2),) and effects[1].blocked == ((1, 2),)
    assert [d.key for d in effects[1].diagnoses] == ["single_entry"]  # "should be 0 ...; you wrote 0.004"
    assert "may not attend to key t3" in effects[1].diagnoses[0].message
    # exactly 0, however written, is right; the allowed entries keep the tolerance (0.9965 typed as 0.997)
    for zero in ("0", "0.00", "-0", "0/3"):
        _, effects = handle(state, Answer(f"1 {zero} {zero}; 0.997 0.0035 {zero}; {t3}"))
        assert kinds(effects) == ["Attempt", "Correct", "Summary"], zero


def test_only_the_masked_cells_of_masked_and_weights_are_exact_by_construction():
    sol = causal()
    above = frozenset({(0, 1), (0, 2), (1, 2)})  # causal: key j > query i is masked
    assert quiz.blocked_cells(sol, sol.step("weights", 1)) == above
    assert quiz.blocked_cells(sol, sol.step("masked", 0)) == above
    for step in ("scaled", "head_output"):
        assert quiz.blocked_cells(sol, sol.step(step, 0)) == frozenset()
    assert quiz.blocked_cells(classic(), classic().step("weights", 0)) == frozenset()  # no mask
    # the weight 1 on query t1's only key is exact too, but follows from the zeros: it is graded by the rule
    state, _ = start(sol, steps=["weights"], head=1)
    t3 = " ".join(f"{v:.4f}" for v in W1_T3)
    _, effects = handle(state, Answer(f"1.000 0 0; 0.9965 0.0035 0; {t3}"))
    assert kinds(effects)[1] == "Correct"
    _, effects = handle(state, Answer(f"0.998 0 0; 0.9965 0.0035 0; {t3}"))  # claims [0.9975, 0.9985]
    assert kinds(effects)[1] == "Wrong" and effects[1].wrong == ((0, 0),)


def test_a_masked_score_near_but_not_minus_inf_is_wrong():
    sol = causal()
    state, _ = start(sol, steps=["masked"], head=1)
    _, effects = handle(state, Answer("0 -1e300 -inf; 4*sqrt(2) 0 -inf; 2*sqrt(2) 4*sqrt(2) 4*sqrt(2)"))
    assert effects[1].wrong == ((0, 1),) and effects[1].blocked == ()  # not within any tolerance of -inf


# --- mistakes the answer cannot tell apart ------------------------------------------------------------


def test_two_mistakes_with_the_same_numbers_are_both_named():
    # scores / sqrt(d_model) = scores / sqrt(4), scores / d_k = scores / 2 and scores / d_v: the same matrix
    state, _ = start(classic(), steps=["scaled"])
    _, effects = handle(state, Answer("1 2 2; 2 4 4; 2 4 4"))
    wrong = effects[1]
    assert [d.key for d in wrong.diagnoses] == ["scale_sqrt_d_model", "scale_d_k", "scale_constant"]
    assert wrong.alike == 3 and [d.key for d in wrong.shown] == ["scale_sqrt_d_model", "scale_d_k", "scale_constant"]
    # the store keeps ONE mistake with its three possible causes (trial F5), not three mistakes
    assert effects[0].diagnoses == ("scale_sqrt_d_model+scale_d_k+scale_constant",)


def test_two_mistakes_that_only_round_alike_show_the_first():
    # head 0 of the causal exercise: scores0 = [[4, ., .], [0, 16, .], [4, 8, 8]] (Q0 = K0 = [[2, 0], [0, 4], [2, 2]]).
    # scores·d_k gives row t3 softmax([8, 16, 16]) = 0.0002, 0.4999, 0.4999; scores·√d_k gives
    # softmax([4√2, 8√2, 8√2]) = 0.0017, 0.4991, 0.4991: both within 0.005, but not the same matrix
    # At 2 places (0.00 0.50 0.50) the answer holds both.
    state, _ = start(causal(), steps=["weights"], head=0)
    _, effects = handle(state, Answer("1 0 0; 0 1 0; 0.00 0.50 0.50"))
    wrong = effects[1]
    assert [d.key for d in wrong.diagnoses] == ["scale_times_d_k", "scale_times_sqrt_d_k"]
    assert wrong.alike == 1 and [d.key for d in wrong.shown] == ["scale_times_d_k"]


def test_a_single_diagnosis_is_alike_with_itself_only():
    state, _ = start(classic(), steps=["scaled"])
    _, effects = handle(state, Answer("2 4 4; 4 8 8; 4 8 8"))
    assert effects[1].alike == 1 and [d.key for d in effects[1].shown] == ["no_scaling"]


def test_a_ragged_row_says_entry_or_entries():
    state, _ = start(classic(), steps=["q"])
    state, _ = handle(state, Answer("1 1"))
    _, effects = handle(state, Answer("2"))
    assert effects[0].message == "row 2 has 1 entry, but row 1 has 2"
    _, effects = handle(state, Answer("2 2 2"))
    assert effects[0].message == "row 2 has 3 entries, but row 1 has 2"
