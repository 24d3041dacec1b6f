"""A matrix pasted as PyTorch or NumPy printed it (issue 21, item 8): read as the numbers it shows, and
graded and diagnosed by ``practice`` and ``check`` as the same numbers typed.

Every printout here is real, copied from the output of torch 2.13.0+cpu and numpy 2.4.6 (Python 3.11),
printed by this script (the name of each case is the label it printed under; ``repr`` is what the
interpreter shows, ``str`` what ``print()`` shows)::

    Q = torch.tensor([[1., 1.], [2., 2.], [2., 2.]], requires_grad=True)
    K = torch.tensor([[1., 1.], [2., 2.], [2., 2.]])
    scores = Q @ K.T; scaled = scores / math.sqrt(2)
    "scores grad": repr(scores)                          "scaled grad": repr(scaled)
    "weights unscaled": repr(torch.softmax(scores, -1))  "weights right": repr(torch.softmax(scaled, -1))
    "scaled f64": repr(scaled.detach().double())         "scaled leaf": repr(scaled.detach().clone().requires_grad_())
    "scaled sci": repr(scaled.detach()) after torch.set_printoptions(sci_mode=True)
    "scaled 3d": repr(scaled.detach()[None])             "scaled 4d": repr(scaled.detach()[None, None])
    "scaled batch": repr(torch.stack([scaled.detach(), scores.detach()]))
    "masked": repr(scaled.masked_fill(torch.triu(torch.ones(3, 3, dtype=torch.bool), 1), float("-inf")))
    "weights with a nan": w = torch.softmax(scaled, -1).detach().clone(); w[1, 0] = float("nan"); repr(w)
    "summarised": repr(torch.arange(2000, dtype=torch.float32).reshape(2, 1000))
    "inf nan": repr(torch.tensor([[1.4142, float("-inf")], [float("nan"), 2.8284]]))
    "posinf": repr(torch.tensor([[float("inf"), 1.0]]))  "1d": repr(torch.tensor([0.5, 0.25]))
    s64 = np.array([[2., 4, 4], [4, 8, 8], [4, 8, 8]]) / np.sqrt(2)
    "np repr": repr(s64)  "np print": str(s64)  "np 3d repr": repr(s64[None])  "np 3d print": str(s64[None])
    "np sci": repr(np.array([[1.0, 1e-5]]))
    "wrapped": repr(torch.arange(24, dtype=torch.float32).reshape(2, 12) / 7)   (rows too wide for a line)
    "wrapped 1d": repr(torch.arange(14, dtype=torch.float32) / 7)
    "np wrapped": str(np.arange(24.).reshape(2, 12) / 7)
    "np f32": repr(np.array([[1.8916, 1.8916], [0.5, 0.25]], dtype=np.float32))

The right values are hand calculations written here (the classic example: Q = K = V =
[[1, 1], [2, 2], [2, 2]], scores = Q·Kᵀ = [[2, 4, 4], [4, 8, 8], [4, 8, 8]], scaled = scores / √2,
weights = the row-wise softmax with math.exp), never the tool's own output read back.
"""

from __future__ import annotations

import math
import time

import pytest

from tutor.answers import MAX_MATRIX_CHARS, parse_matrix, parse_row, printed, printout_begins
from tutor.audit.check import audit
from tutor.audit.solution import NanEntry, read_solution
from tutor.base.errors import AnswerError, ExerciseError
from tutor.exercise.catalog import resolve
from tutor.practice import Answer, EndOfInput, handle, read_event, start
from tutor.steps import solve

from .oracle import require_torch

pytestmark = pytest.mark.usefixtures("child_environment")  # the practice session below writes the store

R2 = math.sqrt(2)
SCORES = [[2, 4, 4], [4, 8, 8], [4, 8, 8]]
SCALED = [[s / R2 for s in row] for row in SCORES]


def softmax(row):
    e = [math.exp(v - max(row)) for v in row]
    return [x / sum(e) for x in e]


WEIGHTS_UNSCALED = [softmax(row) for row in SCORES]  # [0.0634, 0.4683, 0.4683], [0.0091, 0.4955, 0.4955], …
WEIGHTS = [softmax(row) for row in SCALED]  # [0.1084, 0.4458, 0.4458], [0.0287, 0.4856, 0.4856], …

# --- the printouts ---------------------------------------------------------------------------------------

SCORES_GRAD = """tensor([[2., 4., 4.],
        [4., 8., 8.],
        [4., 8., 8.]], grad_fn=<MmBackward0>)"""
SCALED_GRAD = """tensor([[1.4142, 2.8284, 2.8284],
        [2.8284, 5.6569, 5.6569],
        [2.8284, 5.6569, 5.6569]], grad_fn=<DivBackward0>)"""
WEIGHTS_UNSCALED_GRAD = """tensor([[0.0634, 0.4683, 0.4683],
        [0.0091, 0.4955, 0.4955],
        [0.0091, 0.4955, 0.4955]], grad_fn=<SoftmaxBackward0>)"""
WEIGHTS_GRAD = """tensor([[0.1084, 0.4458, 0.4458],
        [0.0287, 0.4856, 0.4856],
        [0.0287, 0.4856, 0.4856]], grad_fn=<SoftmaxBackward0>)"""
SCALED_F64 = """tensor([[1.4142, 2.8284, 2.8284],
        [2.8284, 5.6569, 5.6569],
        [2.8284, 5.6569, 5.6569]], dtype=torch.float64)"""
SCALED_LEAF = """tensor([[1.4142, 2.8284, 2.8284],
        [2.8284, 5.6569, 5.6569],
        [2.8284, 5.6569, 5.6569]], requires_grad=True)"""
SCALED_SCI = """tensor([[1.4142e+00, 2.8284e+00, 2.8284e+00],
        [2.8284e+00, 5.6569e+00, 5.6569e+00],
        [2.8284e+00, 5.6569e+00, 5.6569e+00]])"""
SCALED_3D = """tensor([[[1.4142, 2.8284, 2.8284],
         [2.8284, 5.6569, 5.6569],
         [2.8284, 5.6569, 5.6569]]])"""
SCALED_4D = """tensor([[[[1.4142, 2.8284, 2.8284],
          [2.8284, 5.6569, 5.6569],
          [2.8284, 5.6569, 5.6569]]]])"""
SCALED_BATCH = """tensor([[[1.4142, 2.8284, 2.8284],
         [2.8284, 5.6569, 5.6569],
         [2.8284, 5.6569, 5.6569]],

        [[2.0000, 4.0000, 4.0000],
         [4.0000, 8.0000, 8.0000],
         [4.0000, 8.0000, 8.0000]]])"""
MASKED = """tensor([[1.4142,   -inf,   -inf],
        [2.8284, 5.6569,   -inf],
        [2.8284, 5.6569, 5.6569]], grad_fn=<MaskedFillBackward0>)"""
WEIGHTS_NAN = """tensor([[0.1084, 0.4458, 0.4458],
        [   nan, 0.4856, 0.4856],
        [0.0287, 0.4856, 0.4856]])"""
SUMMARISED = """tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 9.9700e+02, 9.9800e+02,
         9.9900e+02],
        [1.0000e+03, 1.0010e+03, 1.0020e+03,  ..., 1.9970e+03, 1.9980e+03,
         1.9990e+03]])"""
INF_NAN = """tensor([[1.4142,   -inf],
        [   nan, 2.8284]])"""
POSINF = "tensor([[inf, 1.]])"
ONE_D = "tensor([0.5000, 0.2500])"
NP_REPR = """array([[1.41421356, 2.82842712, 2.82842712],
       [2.82842712, 5.65685425, 5.65685425],
       [2.82842712, 5.65685425, 5.65685425]])"""
NP_PRINT = """[[1.41421356 2.82842712 2.82842712]
 [2.82842712 5.65685425 5.65685425]
 [2.82842712 5.65685425 5.65685425]]"""
NP_3D_REPR = """array([[[1.41421356, 2.82842712, 2.82842712],
        [2.82842712, 5.65685425, 5.65685425],
        [2.82842712, 5.65685425, 5.65685425]]])"""
NP_3D_PRINT = """[[[1.41421356 2.82842712 2.82842712]
  [2.82842712 5.65685425 5.65685425]
  [2.82842712 5.65685425 5.65685425]]]"""
NP_SCI = "array([[1.e+00, 1.e-05]])"
WRAPPED = """tensor([[0.0000, 0.1429, 0.2857, 0.4286, 0.5714, 0.7143, 0.8571, 1.0000, 1.1429,
         1.2857, 1.4286, 1.5714],
        [1.7143, 1.8571, 2.0000, 2.1429, 2.2857, 2.4286, 2.5714, 2.7143, 2.8571,
         3.0000, 3.1429, 3.2857]])"""
WRAPPED_1D = """tensor([0.0000, 0.1429, 0.2857, 0.4286, 0.5714, 0.7143, 0.8571, 1.0000, 1.1429,
        1.2857, 1.4286, 1.5714, 1.7143, 1.8571])"""
NP_WRAPPED = """[[0.         0.14285714 0.28571429 0.42857143 0.57142857 0.71428571
  0.85714286 1.         1.14285714 1.28571429 1.42857143 1.57142857]
 [1.71428571 1.85714286 2.         2.14285714 2.28571429 2.42857143
  2.57142857 2.71428571 2.85714286 3.         3.14285714 3.28571429]]"""
NP_F32 = """array([[1.8916, 1.8916],
       [0.5   , 0.25  ]], dtype=float32)"""


def lines(text: str) -> list[str]:
    return text.split("\n")


# --- reading them ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "truth", "places"), [
    (SCORES_GRAD, SCORES, 0),  # torch prints whole values as "2.": a decimal to 0 places
    (SCALED_GRAD, SCALED, 4),
    (WEIGHTS_UNSCALED_GRAD, WEIGHTS_UNSCALED, 4),
    (WEIGHTS_GRAD, WEIGHTS, 4),
    (SCALED_F64, SCALED, 4),
    (SCALED_LEAF, SCALED, 4),
    (SCALED_SCI, SCALED, 4),  # 1.4142e+00: four places
    (SCALED_3D, SCALED, 4),  # shape (1, 3, 3): its one matrix
    (SCALED_4D, SCALED, 4),  # shape (1, 1, 3, 3)
    (NP_REPR, SCALED, 8),
    (NP_PRINT, SCALED, 8),
    (NP_3D_REPR, SCALED, 8),
    (NP_3D_PRINT, SCALED, 8),
    (" ".join(SCALED_GRAD.split()), SCALED, 4),  # on one line
], ids=["scores-grad", "scaled-grad", "weights-unscaled", "weights", "float64", "requires-grad", "sci", "3d", "4d",
        "np-repr", "np-print", "np-3d-repr", "np-3d-print", "one-line"])
def test_a_printout_reads_as_the_numbers_it_shows(text, truth, places):
    m = parse_matrix(text)
    assert [len(row) for row in m] == [len(row) for row in truth]
    for row, true_row in zip(m, truth):
        for entry, true in zip(row, true_row):
            # what was printed is the true value rounded to `places`: a rounded claim, never an exact one
            assert entry.value() == round(true, places)
            assert (entry.places, entry.is_exact) == (places, False)
            assert abs(entry.value() - true) <= 0.5 * 10**-places


@pytest.mark.parametrize(("text", "values", "places"), [
    (NP_SCI, [[1.0, 1e-5]], [[0, 5]]),  # NumPy's 1.e-05: one significant digit, five places
    (ONE_D, [[0.5, 0.25]], [[4, 4]]),  # a 1-D tensor is one row
    (NP_F32, [[1.8916, 1.8916], [0.5, 0.25]], [[4, 4], [1, 2]]),  # padded "0.5   ," and dtype=float32
    ("tensor([[1., 2.]], device='cuda:0')", [[1.0, 2.0]], [[0, 0]]),  # torch's form on a GPU (not printable here)
    ("tensor(1.5000, dtype=torch.float64)", [[1.5]], [[4]]),  # a 0-d tensor: a 1×1 matrix
])
def test_other_printed_forms(text, values, places):
    m = parse_matrix(text)
    assert [[e.value() for e in row] for row in m] == values
    assert [[e.places for e in row] for row in m] == places


@pytest.mark.parametrize(("text", "rows"), [(WRAPPED, 2), (NP_WRAPPED, 2), (WRAPPED_1D, 1)])
def test_a_row_wrapped_over_lines_stays_one_row(text, rows):
    m = parse_matrix(text)
    values = [e for row in m for e in row]
    assert len(m) == rows and len({len(row) for row in m}) == 1
    # entry k is k/7, rounded to the places printed ("1." and NumPy's "0." to none)
    assert [abs(e.value() - k / 7) <= 0.5 * 10**-e.places for k, e in enumerate(values)] == [True] * len(values)
    assert len(values) == (24 if rows == 2 else 14)


def test_where_a_pasted_printout_goes_on_to_the_next_line():
    firsts = [lines(t)[0] for t in (SCALED_GRAD, NP_REPR, NP_F32, SCALED_3D, NP_3D_PRINT, NP_WRAPPED, WRAPPED_1D)]
    assert [printout_begins(line) for line in firsts] == [True] * len(firsts)
    # a row that closes on its line is typed row by row, as before; a line that is whole is read at once
    assert [printout_begins(line) for line in (lines(NP_PRINT)[0], "[[1, 1],", "tensor([[1, 2]", POSINF)] == [False] * 4


def test_infinities_read_as_typed():
    m = parse_matrix(MASKED)
    assert [[e.infinity for e in row] for row in m] == [[0, -1, -1], [0, 0, -1], [0, 0, 0]]
    assert [m[2][1].value(), m[1][0].value()] == [round(8 / R2, 4), round(4 / R2, 4)]
    assert [e.infinity for e in parse_matrix(POSINF)[0]] == [1, 0]


def test_a_row_reads_a_1d_tensor():
    assert [e.value() for e in parse_row(ONE_D)] == [0.5, 0.25]


def test_columns_stay_where_they_were_printed():
    # what is dropped becomes spaces: tensor( and the keyword arguments, not the numbers
    shown = printed(SCALED_GRAD)
    assert len(shown) == len(SCALED_GRAD) and shown.split("\n")[1] == lines(SCALED_GRAD)[1]
    assert shown.strip() == SCALED_GRAD[len("tensor("):SCALED_GRAD.index(", grad_fn")]


# --- what is refused, in one line --------------------------------------------------------------------------


NAN_LINE = ('row 2, entry 1: "nan" is not a number, and no value asked for here is NaN (a query that may attend '
            "to no key has weights 0 here, not 0/0); give the value it should be")


@pytest.mark.parametrize(("text", "message"), [
    (WEIGHTS_NAN, NAN_LINE),
    (INF_NAN, NAN_LINE),
    (SCALED_BATCH, "the pasted array has shape (2, 3, 3): 2 matrices of [3×3], but one matrix is expected; "
                   "paste one of them (such as x[0])"),
    ("[[[1. 2.]]\n\n [[3. 4.]]]", "the pasted array has shape (2, 1, 2): 2 matrices of [1×2], but one matrix is "
                                  "expected; paste one of them (such as x[0])"),
    (SUMMARISED, 'line 1: the matrix was printed in part ("..." at column 47); print it whole (after '
                 "torch.set_printoptions(threshold=100_000) or np.set_printoptions(threshold=100_000)) and paste that"),
    ("tensor([[1, 2]", 'the "[" at column 8 is never closed'),
    ("tensor([[1, 2],\n        [3, 4]]", 'line 1: the "(" of tensor( at column 7 is never closed'),
    ("tensor([[1, 2]]))", 'unexpected ")" at column 17, after the ")" that closes tensor(...)'),
    ("array([[1, 2],\n       [3, 4]], dtype=float32) * 2",
     'line 2: unexpected "* 2" at column 32, after the ")" that closes array(...)'),
    ("tensor([[1, 2]], grad_fn=SoftmaxBackward0())",
     'unexpected "grad_fn=SoftmaxBackward0()" at column 18 in tensor(...): only keyword arguments such as '
     "dtype=torch.float64 or grad_fn=<...> may follow the numbers"),
    ("tensor([[1, 2], [3, 4]]]", 'unmatched "]" at column 24'),
    ("tensor([])", "no rows given"),
])
def test_refused_in_one_line(text, message):
    with pytest.raises(AnswerError) as info:
        parse_matrix(text)
    assert str(info.value) == message


def test_nothing_is_evaluated():
    # the text inside tensor(...) goes through the answer grammar, which knows no names but sqrt, exp, cos, sin, e, inf
    with pytest.raises(AnswerError, match="unknown name \"__import__\"|unexpected character"):
        parse_matrix("tensor([[__import__('os').system('echo hi'), 1]])")
    with pytest.raises(AnswerError, match="only keyword arguments such as dtype=torch.float64"):
        parse_matrix("array([[1, 2]], dtype=__import__('os'))")


def test_limits_still_hold():
    body = ", ".join(["1.0000"] * 20_000)
    with pytest.raises(AnswerError, match=f"at most {MAX_MATRIX_CHARS} are allowed"):
        parse_matrix(f"tensor([[{body}]])")
    with pytest.raises(AnswerError, match="more than 4096 entries"):
        parse_matrix("tensor([[" + ", ".join(["1."] * 4097) + "]])")
    # brackets nested thousands deep: no recursion through them, one line, at once
    began = time.perf_counter()
    with pytest.raises(AnswerError, match="brackets nested too deeply"):
        parse_matrix("tensor(" + "[" * 5000 + "1" + "]" * 5000 + ")")
    assert time.perf_counter() - began < 2


# --- practice: graded and diagnosed as the same numbers typed ---------------------------------------------


def classic():
    return solve(resolve("single-head-3x4"))


def run(state, *typed):
    out = []
    for line in typed:
        state, effects = handle(state, read_event(line))
        out += effects
    return state, out


def kinds(effects):
    return [type(e).__name__ for e in effects]


def test_a_pasted_unscaled_tensor_is_diagnosed_as_the_typed_numbers_are():
    state, _ = start(classic(), steps=["scaled"])
    _, typed = handle(state, Answer("2 4 4; 4 8 8; 4 8 8"))
    after, pasted = run(state, *lines(SCORES_GRAD))
    assert kinds(pasted) == ["Prompt", "Prompt", "Attempt", "Wrong", "Prompt"]  # a prompt for each line to come
    assert [p.more for p in pasted[:2]] == [True, True] and pasted[-1].more is False
    wrong, wrong_typed = pasted[3], typed[1]
    assert wrong.wrong == wrong_typed.wrong == tuple((i, j) for i in range(3) for j in range(3))  # all off by √2
    assert [d.key for d in wrong.diagnoses] == [d.key for d in wrong_typed.diagnoses]
    assert wrong.diagnoses[0].key == "no_scaling"
    assert pasted[2].diagnosis == "no_scaling" and after.attempts == 1


@pytest.mark.parametrize("text", [SCALED_GRAD, SCALED_SCI, SCALED_3D, SCALED_4D, NP_REPR, NP_3D_PRINT,
                                  " ".join(SCALED_F64.split())])
def test_a_pasted_right_tensor_is_right(text):
    state, _ = start(classic(), steps=["scaled", "weights"])
    state, effects = run(state, *lines(text))
    assert kinds(effects)[-4:-2] == ["Attempt", "Correct"] and state.index == 1


def test_numpys_print_is_typed_row_by_row_and_right():
    state, _ = start(classic(), steps=["scaled"])
    state, effects = run(state, *lines(NP_PRINT))  # [[…] closes its first row: the row-by-row form
    assert kinds(effects) == ["RowByRow", "Prompt", "Prompt", "Attempt", "Correct", "Summary"]


def test_weights_pasted_unscaled_are_diagnosed():
    state, _ = start(classic(), steps=["weights"])
    _, effects = run(state, *lines(WEIGHTS_UNSCALED_GRAD))
    assert kinds(effects)[-3:] == ["Attempt", "Wrong", "Prompt"]
    assert effects[-2].diagnoses[0].key == "no_scaling"


@pytest.mark.parametrize(("text", "message"), [
    (WEIGHTS_NAN, NAN_LINE),
    (SCALED_BATCH, "the pasted array has shape (2, 3, 3): 2 matrices of [3×3], but one matrix is expected; "
                   "paste one of them (such as x[0])"),
])
def test_a_printout_that_is_no_answer_is_one_line_and_nothing_is_graded(text, message):
    state, _ = start(classic(), steps=["weights"])
    after, effects = run(state, *lines(text))
    assert kinds(effects)[-2:] == ["Invalid", "Prompt"] and "Attempt" not in kinds(effects)
    assert effects[-2].message == message
    assert after.attempts == 0 and after.pasted == ""


def test_a_paste_cut_short_is_read_as_it_is():
    state, _ = start(classic(), steps=["scaled"])
    # a blank line where no batch goes on ends the paste: its open bracket is named
    _, effects = run(state, *lines(SCALED_GRAD)[:2], "")
    assert kinds(effects) == ["Prompt", "Prompt", "Invalid", "Prompt"]
    assert effects[2].message == 'line 1: the "[" at column 8 is never closed'
    # so does the end of the input
    state, _ = run(state, *lines(SCALED_GRAD)[:2])
    _, effects = handle(state, EndOfInput())
    assert kinds(effects) == ["Invalid", "Summary"]
    # tensor( on a line that does not end with "," (where torch breaks its lines) is read at once
    _, effects = run(start(classic(), steps=["scaled"])[0], "tensor([[1, 2]")
    assert kinds(effects) == ["Invalid", "Prompt"] and effects[0].message == 'the "[" at column 8 is never closed'


def test_a_pasted_tensor_through_the_command(cli):
    code, out, err = cli("practice", "single-head-3x4", "--steps", "scaled", input=SCALED_GRAD + "\n")
    assert (code, err) == (0, "")
    shown = [line.rstrip() for line in out.splitlines()]
    # each line after the first is asked for with the continuation prompt, and echoed after it
    assert "scaled> tensor([[1.4142, 2.8284, 2.8284]," in shown
    assert "scaled …>         [2.8284, 5.6569, 5.6569]," in shown
    assert "scaled …>         [2.8284, 5.6569, 5.6569]], grad_fn=<DivBackward0>)" in shown
    assert "✓ Right." in shown


# --- check: a step given as a printout ---------------------------------------------------------------------


def block(step: str, text: str) -> str:
    """``step: |`` and ``text`` as a YAML block scalar."""
    return f"{step}: |\n" + "".join(f"  {line}\n" for line in lines(text))


def test_check_reads_a_pasted_step_as_the_same_numbers_in_a_list():
    plain = audit(read_solution(
        "exercise: single-head-3x4\n"
        "weights: [[0.0634, 0.4683, 0.4683], [0.0091, 0.4955, 0.4955], [0.0091, 0.4955, 0.4955]]\n", "plain.yaml"))
    pasted = audit(read_solution("exercise: single-head-3x4\n" + block("weights", WEIGHTS_UNSCALED_GRAD), "p.yaml"))
    (p,), (q,) = plain.steps, pasted.steps
    assert q.given.texts() == p.given.texts() == (("0.0634", "0.4683", "0.4683"), ("0.0091", "0.4955", "0.4955"),
                                                  ("0.0091", "0.4955", "0.4955"))
    assert q.wrong == p.wrong and len(q.wrong) == 9
    assert [d.key for d in q.diagnoses] == [d.key for d in p.diagnoses] == ["no_scaling"]


def test_check_diagnoses_unscaled_scores_pasted_as_a_tensor():
    report = audit(read_solution("exercise: single-head-3x4\n" + block("scores", SCORES_GRAD)
                                 + block("scaled", SCORES_GRAD) + block("weights", WEIGHTS_UNSCALED_GRAD), "s.yaml"))
    scores, scaled, weights = report.steps
    assert scores.wrong == () and scores.given.values().tolist() == SCORES
    assert report.first_wrong is scaled and [d.key for d in scaled.diagnoses] == ["no_scaling"]
    assert weights.follows is not None  # the weights carry the error forward


def test_check_takes_a_pasted_nan_as_a_wrong_entry():
    report = audit(read_solution("exercise: single-head-3x4\n" + block("weights", WEIGHTS_NAN), "s.yaml"))
    (w,) = report.steps
    assert isinstance(w.given.entries[1][0], NanEntry)
    assert w.wrong == ((1, 0),)  # the other entries are right: softmax of scores / √2, to 4 places


def test_check_the_command_says_the_same_for_both(cli, tmp_path):
    plain = tmp_path / "plain.yaml"
    plain.write_text("exercise: single-head-3x4\n"
                     "weights: [[0.0634, 0.4683, 0.4683], [0.0091, 0.4955, 0.4955], [0.0091, 0.4955, 0.4955]]\n")
    pasted = tmp_path / "pasted.yaml"
    pasted.write_text("exercise: single-head-3x4\n" + block("weights", WEIGHTS_UNSCALED_GRAD))
    wide = {"COLUMNS": "400"}  # the report's lines whole: the two names differ in length
    (code, out, err), (code2, out2, err2) = cli("check", plain, env=wide), cli("check", pasted, env=wide)
    assert (code, err) == (code2, err2) == (1, "")
    assert out.replace(str(plain), "FILE") == out2.replace(str(pasted), "FILE")
    assert "  Diagnosis: You forgot to divide by √d_k: scaled = scores / √2." in out2.splitlines()


def test_check_names_a_bad_printout_at_its_step():
    with pytest.raises(ExerciseError) as info:
        read_solution("exercise: single-head-3x4\n" + block("scaled", SCALED_BATCH), "s.yaml")
    assert str(info.value).splitlines() == [
        "s.yaml:2:9: scaled: the pasted array has shape (2, 3, 3): 2 matrices of [3×3], but one matrix is expected; "
        "paste one of them (such as x[0])"]


# --- when torch is here: print a tensor now and read it back -----------------------------------------------


def test_what_this_torch_prints_reads_back():
    torch = require_torch()
    # float64: NumPy prints 8 places, more than a float32 result is right to (see docs/exercise-format.md)
    q = torch.tensor([[1.0, 1.0], [2.0, 2.0], [2.0, 2.0]], dtype=torch.float64, requires_grad=True)
    scaled = q @ q.detach().T / math.sqrt(2)
    for shown in (repr(scaled), repr(scaled.detach()[None]), repr(scaled.detach().numpy()), str(scaled.detach().numpy())):
        m = parse_matrix(shown)
        assert all(abs(e.value() - true) <= 0.5 * 10**-e.places for row, t in zip(m, SCALED) for e, true in zip(row, t))
