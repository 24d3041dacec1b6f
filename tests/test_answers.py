"""The answer parser: hand-checked values, every error, the matrix formats,
the comparisons, and hypothesis properties (never another exception, never a
hang, never code run).  Expected values are built with sympy's constructors
directly, never through the parser under test."""

from __future__ import annotations

import ast
import math
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
import sympy
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from sympy import E, Integer, Rational, exp, oo, sqrt

from tutor import answers
from tutor.answers import (
    Entry,
    claim,
    entry_from_value,
    judge,
    matrix_from_value,
    parse_entry,
    parse_matrix,
    parse_row,
    practice_verdict,
    split_entries,
)
from tutor.base.errors import AnswerError
from tutor.base.messages import EN

ROOT = Path(__file__).resolve().parents[1]


def same(a: sympy.Expr, b: sympy.Expr) -> bool:
    """Exactly equal: structurally, or their difference simplifies to 0."""
    return a == b or sympy.simplify(a - b) == 0


def texts(matrix: tuple[tuple[Entry, ...], ...]) -> list[list[str]]:
    return [[e.text for e in row] for row in matrix]


# --- exact values ------------------------------------------------------------------

EXACT = [
    ("0", Integer(0)),
    ("7", Integer(7)),
    ("010", Integer(10)),  # YAML 1.2: ten, not eight
    ("-3", Integer(-3)),
    ("+3", Integer(3)),
    ("--3", Integer(3)),
    ("1/3", Rational(1, 3)),
    ("-2/5", Rational(-2, 5)),
    ("6/4", Rational(3, 2)),
    ("1 + 2 * 3", Integer(7)),
    ("(1 + 2) * 3", Integer(9)),
    ("2 - 3 - 4", Integer(-5)),  # left-associative
    ("12 / 3 / 2", Integer(2)),
    ("1/2/3", Rational(1, 6)),
    ("2^3", Integer(8)),
    ("2**3", Integer(8)),
    ("2^3^2", Integer(512)),  # right-associative: 2^9
    ("-2^2", Integer(-4)),  # power before sign, as in Python and maths
    ("(-2)^2", Integer(4)),
    ("2^-1", Rational(1, 2)),
    ("2^-2*3", Rational(3, 4)),
    ("4^(1/2)", Integer(2)),
    ("8^(3/2)", 16 * sqrt(2)),
    ("2^(-1/2)", 1 / sqrt(2)),
    ("0^0", Integer(1)),
    ("sqrt(2)", sqrt(2)),
    ("sqrt(8)", 2 * sqrt(2)),
    ("sqrt(1/2)", sqrt(2) / 2),
    ("1/sqrt(2)", sqrt(2) / 2),
    ("sqrt(0)", Integer(0)),
    ("√2", sqrt(2)),
    ("√(2)", sqrt(2)),
    ("√2/2", sqrt(2) / 2),
    ("√√16", Integer(2)),
    ("e", E),
    ("E", E),
    ("e^2", E**2),
    ("e^(-3/2)", exp(Rational(-3, 2))),
    ("e^-sqrt(2)", exp(-sqrt(2))),
    ("exp(1)", E),
    ("exp(0)", Integer(1)),
    ("exp(-3/2)", exp(Rational(-3, 2))),
    ("exp(2)/(exp(2) + exp(1))", exp(2) / (exp(2) + E)),
    ("1/(1 + 2*exp(sqrt(2)))", 1 / (1 + 2 * exp(sqrt(2)))),
    ("(4 + exp(-sqrt(2)))/(2 + exp(-sqrt(2)))", (4 + exp(-sqrt(2))) / (2 + exp(-sqrt(2)))),
    ("3*sqrt(2)/4", 3 * sqrt(2) / 4),
    ("-sqrt(2)/2", -sqrt(2) / 2),
    ("2×3", Integer(6)),
    ("2·3", Integer(6)),
    ("2⋅3", Integer(6)),
    ("6÷4", Rational(3, 2)),
    ("−1", Integer(-1)),  # U+2212 MINUS SIGN
    ("  1 /\t3  ", Rational(1, 3)),
    ("(((1)))", Integer(1)),
]


@pytest.mark.parametrize(("text", "expected"), EXACT)
def test_exact_values(text: str, expected: sympy.Expr) -> None:
    entry = parse_entry(text)
    assert same(entry.expr, expected), (entry.expr, expected)
    assert entry.is_exact
    assert entry.places is None
    assert entry.text == text.strip()
    assert entry.value() == pytest.approx(float(expected.evalf(30)), rel=1e-15)


@pytest.mark.parametrize(
    ("text", "expected", "sign"),
    [
        ("inf", oo, 1),
        ("+inf", oo, 1),
        ("-inf", -oo, -1),
        ("- inf", -oo, -1),
        ("−inf", -oo, -1),
        ("∞", oo, 1),
        ("-∞", -oo, -1),
        ("-Inf", -oo, -1),
        ("-.inf", -oo, -1),  # YAML 1.2 spelling
        ("-infinity", -oo, -1),
        ("oo", oo, 1),  # sympy's spelling, pasted from sympy output (issue 8, B.6)
        ("-oo", -oo, -1),
    ],
)
def test_infinity_alone(text: str, expected: sympy.Expr, sign: int) -> None:
    entry = parse_entry(text)
    assert entry.expr == expected
    assert entry.is_exact and entry.places is None
    assert entry.value() == sign * math.inf


# --- decimals: exact value from the text, not exact as a claim --------------------------

DECIMALS = [
    ("0.45", Rational(45, 100), 2),
    ("-0.4500", Rational(-45, 100), 4),
    ("+0.45", Rational(45, 100), 2),
    ("−0.5", Rational(-1, 2), 1),
    ("0.1", Rational(1, 10), 1),  # 1/10, not the binary float nearest to it
    (".5", Rational(1, 2), 1),
    ("1.", Integer(1), 0),
    ("2.0", Integer(2), 1),
    ("1e-3", Rational(1, 1000), 3),
    ("1E-3", Rational(1, 1000), 3),
    ("1.5e-2", Rational(15, 1000), 3),
    ("1.5E2", Integer(150), -1),  # places count the value's places: claim ±5
    ("1e3", Integer(1000), -3),
    (".25e1", Rational(5, 2), 1),
    ("0.30000000000000004", Rational(30000000000000004, 10**17), 17),
    # U+2212 in the exponent too, as in a pasted table (exercise files read it so); found by tests/test_fuzz.py
    ("1e−3", Rational(1, 1000), 3),
    ("−1.5E−2", Rational(-15, 1000), 3),
    ("2.8399541e−01", Rational(28399541, 10**8), 8),
    (".5e−1", Rational(1, 20), 2),
]


@pytest.mark.parametrize(("text", "expected", "places"), DECIMALS)
def test_decimal_literals(text: str, expected: sympy.Expr, places: int) -> None:
    entry = parse_entry(text)
    assert entry.expr == expected
    assert entry.is_exact is False
    assert entry.places == places


@pytest.mark.parametrize("text", ["1e−401", "1e−−3", "1e-−3", "1e−"])
def test_a_typographic_minus_in_an_exponent_keeps_the_exponent_rules(text: str) -> None:
    with pytest.raises(AnswerError):
        parse_entry(text)


def test_a_typographic_minus_in_an_exponent_in_a_row_and_a_solution_file(tmp_path, cli) -> None:
    assert [e.value() for e in parse_row("2.5e−1, 1e−2, 3")] == [0.25, 0.01, 3.0]
    sol = tmp_path / "s.yaml"
    sol.write_text("exercise: single-head-3x4\nq: [[1, 1], [2, 2], [2, 2.0e−0]]\n", encoding="utf-8")
    code, out, _ = cli("check", sol)
    assert code == 0 and "right" in out


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0.5*sqrt(2)", sqrt(2) / 2),
        ("(0.45)", Rational(9, 20)),
        ("--0.45", Rational(9, 20)),
        ("1.41/2", Rational(141, 200)),
        ("2^0.5", sqrt(2)),  # a half written as a decimal
    ],
)
def test_expression_with_decimals_is_inexact_without_places(text: str, expected: sympy.Expr) -> None:
    entry = parse_entry(text)
    assert same(entry.expr, expected)
    assert entry.is_exact is False
    assert entry.places is None


def test_entry_is_a_frozen_value() -> None:
    a, b = parse_entry("1/2"), parse_entry("1/2")
    assert a == b and hash(a) == hash(b)
    with pytest.raises(AttributeError):
        a.text = "2"  # type: ignore[misc]
    assert str(parse_entry(" 1/2 ")) == "1/2"


# --- every message of the catalogue, word for word ------------------------------------

LONG = "1" * 101
ERRORS: dict[str, tuple[object, object, str]] = {
    "answer.empty": (parse_entry, "   ", "no answer given"),
    "answer.too_long": (parse_entry, "1+" * 1000 + "1", "the answer has 2001 characters; at most 2000 are allowed"),
    "answer.unexpected": (parse_entry, "2 + * 3", 'unexpected "*" at column 5 in "2 + * 3"'),
    "answer.unexpected_char": (parse_entry, "2 # 3", 'unexpected character "#" at column 3 in "2 # 3"'),
    "answer.undecodable": (
        parse_entry,
        "\ufffd\ufffd\ufffd2",  # "√2" typed on an ASCII stream: three bytes it could not decode
        "a character the input stream could not decode at column 1 (the stream's encoding cannot hold it); "
        "type answers in ASCII, such as sqrt(2) and -inf",
    ),
    "answer.unexpected_end": (parse_entry, "2 +", 'the answer "2 +" ends too early (expected a number)'),
    "answer.unclosed": (parse_entry, "(1 + 2", 'the "(" at column 1 in "(1 + 2" is never closed'),
    "answer.unmatched": (parse_entry, "1 + 2)", 'unmatched ")" at column 6 in "1 + 2)"'),
    "answer.log": (
        parse_entry,
        "log(2)",
        '"log" at column 1 in "log(2)": a logarithm is not part of what answers can be written in (sqrt, exp, cos, sin, e); '
        "give it as a decimal (log(2) ≈ 0.6931)",
    ),
    "answer.unknown_name": (
        parse_entry,
        "2*pi",
        'unknown name "pi" at column 3 in "2*pi" (known: sqrt, exp, cos, sin, e, inf)',
    ),
    "answer.needs_parens": (parse_entry, "sqrt 2", '"sqrt" at column 1 in "sqrt 2" needs parentheses, e.g. sqrt(2)'),
    "answer.nan": (parse_entry, "2*nan", '"nan" at column 3 in "2*nan" is not a number'),
    "answer.nan_alone": (
        parse_entry,
        " NaN ",
        '"NaN" is not a number, and no value asked for here is NaN (a query that may attend to no key has weights 0 '
        "here, not 0/0); give the value it should be",
    ),
    "answer.inf_alone": (parse_entry, "1 - inf", 'inf at column 5 in "1 - inf" must stand alone, as inf or -inf'),
    "answer.too_deep": (
        parse_entry,
        "-" * 51 + "1",
        'nesting deeper than 50 levels at column 51 in "' + "-" * 51 + '1"',
    ),
    "answer.number_too_long": (
        parse_entry,
        "2*" + LONG,
        'the number at column 3 in "2*' + "1" * 57 + '…" has more than 100 digits',
    ),
    "answer.decimal_exponent": (
        parse_entry,
        "1e401",
        'the exponent of the number at column 1 in "1e401" is beyond ±400',
    ),
    "answer.power_form": (
        parse_entry,
        "2^(1/3)",
        'the power at column 2 in "2^(1/3)" needs a whole-number or half exponent (e.g. 2, -1, 1/2)',
    ),
    "answer.power_too_large": (parse_entry, "2^65", 'the exponent at column 2 in "2^65" is beyond ±64'),
    "answer.exp_range": (parse_entry, "exp(1001)", 'the argument of exp at column 1 in "exp(1001)" is beyond ±1000'),
    "answer.trig_range": (parse_entry, "2*sin(1001)", 'the argument of sin at column 3 in "2*sin(1001)" is beyond ±1000 (radians)'),
    "answer.too_large": (parse_entry, "1e300*10", 'the value at column 6 in "1e300*10" is too large'),
    "answer.too_large_exact": (
        parse_entry,
        "(10^-50)^64",
        'the value at column 9 in "(10^-50)^64" is too large to check exactly (over 600 digits); write it as a decimal',
    ),
    "answer.too_small": (
        parse_entry,
        "exp(-1000)^2",
        'the value at column 11 in "exp(-1000)^2" is too small to check exactly (not zero, but below 1e-600); '
        "write it as a decimal",
    ),
    "answer.too_costly": (
        parse_entry,
        # exp(exp(S - S)-1)-1 for S a sum of 40 exp(i/(7+e)) written twice: zero, though no exact form sees it
        "exp(exp((" + "+".join(f"exp({i}/(7+e))" for i in range(1, 41)) + ")-("
        + "+".join(f"exp({i}/(7+e))" for i in range(40, 0, -1)) + "))-1)-1",
        'the value at column 1 in "exp(exp((exp(1/(7+e))+exp(2/(7+e))+exp(3/(7+e))+exp(4/(7+e)…" is too large to '
        "check exactly (it takes more work than one entry may); write it as a decimal",
    ),
    "answer.too_costly_total": (
        lambda text: spent_budget(parse_entry, text),
        "1 + exp(e)",
        'the value at column 5 in "1 + exp(e)" is too large to check exactly (with the entries before it, more work '
        "than one matrix or file may take); write it as a decimal",
    ),
    "answer.div_zero": (parse_entry, "1/(2-2)", 'division by zero at column 2 in "1/(2-2)"'),
    "answer.div_near_zero": (
        parse_entry,
        "1/((exp(690)+1) - exp(690))",  # 1, but 256-bit intervals of 10^299-sized parts cannot see it
        'division by a value that cannot be told from zero at column 2 in "1/((exp(690)+1) - exp(690))" '
        "(it cancels to within 1e-77 of its parts)",
    ),
    "answer.sqrt_negative": (parse_entry, "sqrt(1-2)", 'square root of a negative number at column 1 in "sqrt(1-2)"'),
    "answer.not_text": (parse_entry, 3, "expected text, found int"),
    "answer.bool": (entry_from_value, True, "true is not a number (true/false are not allowed in a matrix)"),
    "answer.bad_value": (entry_from_value, None, "expected a number or text, found nothing (null)"),
    "answer.int_too_long": (entry_from_value, 10**200, "the whole number has more than 100 digits"),
    "matrix.entry": (
        parse_matrix,
        "1 2; 3 x",
        'row 2, entry 2: unknown name "x" at column 1 in "x" (known: sqrt, exp, cos, sin, e, inf)',
    ),
    "matrix.row_entry": (parse_row, "1 2/0", 'entry 2: division by zero at column 2 in "2/0"'),
    "matrix.empty_entry": (parse_matrix, "1, , 2", "row 1, entry 2 is empty"),
    "matrix.row_empty_entry": (parse_row, "1, 2,", "entry 3 is empty"),
    "matrix.empty_row": (parse_matrix, "[[1, 2], []]", "row 2 is empty"),
    "matrix.empty_between": (parse_matrix, "1 1;;2 2", "row 2 is empty (two \";\" in a row?); write every row"),
    "matrix.ragged": (parse_matrix, "1 2 3; 4 5", "row 2 has 2 entries, but row 1 has 3"),
    "matrix.no_rows": (parse_matrix, "[]", "no rows given"),
    "matrix.one_row": (parse_row, "1 2; 3 4", "expected one row, found 2 rows"),
    "matrix.too_many": (parse_matrix, " ".join(["1"] * 4097), "the matrix has more than 4096 entries"),
    "matrix.bracket_unclosed": (parse_matrix, "[[1, 2], [3, 4]", 'the "[" at column 1 is never closed'),
    "matrix.bracket_unmatched": (parse_matrix, "[1, 2]]", 'unmatched "]" at column 7'),
    "matrix.bracket_deep": (
        parse_matrix,
        "[[1, 2], [[3]]]",  # [[[1]]] is a printed array of shape (1, 1, 1): its one matrix [[1]]
        'brackets nested too deeply at column 11 (a matrix is [[1, 2], [3, 4]])',
    ),
    "matrix.bracket_mixed": (
        parse_matrix,
        "[1, 2], 3",
        "mix of bracketed rows and bare entries; write every row in brackets, e.g. [[1, 2], [3, 4]]",
    ),
    "matrix.not_list": (matrix_from_value, "1 2", "expected a matrix (a list of rows), found str"),
    "matrix.row_not_list": (matrix_from_value, [1, 2], "row 1: expected a list of numbers, found int"),
    # a matrix pasted as PyTorch or NumPy printed it (more in tests/test_pasted_output.py)
    "matrix.on_line": (parse_matrix, "[[1, 2],\n [3, 4]]]", 'line 2: unmatched "]" at column 9'),
    "matrix.printed_unclosed": (parse_matrix, "tensor([[1, 2]]", 'the "(" of tensor( at column 7 is never closed'),
    "matrix.printed_after": (
        parse_matrix,
        "tensor([[1, 2]]) + 1",
        'unexpected "+ 1" at column 18, after the ")" that closes tensor(...)',
    ),
    "matrix.printed_argument": (
        parse_matrix,
        "array([[1, 2]], 3)",
        'unexpected "3" at column 17 in array(...): only keyword arguments such as dtype=torch.float64 or '
        "grad_fn=<...> may follow the numbers",
    ),
    "matrix.printed_batch": (
        parse_matrix,
        "[[[1, 2]], [[3, 4]], [[5, 6]]]",
        "the pasted array has shape (3, 1, 2): 3 matrices of [1×2], but one matrix is expected; paste one of them "
        "(such as x[0])",
    ),
    "matrix.printed_summarized": (
        parse_matrix,
        "tensor([[0., 1.,  ..., 9.]])",
        'the matrix was printed in part ("..." at column 19); print it whole (after '
        "torch.set_printoptions(threshold=100_000) or np.set_printoptions(threshold=100_000)) and paste that",
    ),
}
def spent_budget(fn, text):
    """``fn(text)`` after the entries before it spent the budget of their matrix or file."""
    from tutor.answers import values

    with values.budget(values.Work(0, "answer.too_costly_total")):
        return fn(text)


# Backstops no input is known to reach: every path to a non-real or
# non-finite value is refused earlier with a more precise message; a sum of
# three or four independent square roots (coefficients of at most 600 digits)
# that 4,096-bit intervals cannot tell from zero would need a near-identity
# nobody has found.
BACKSTOPS = {"answer.not_real", "answer.too_close"}


def test_every_message_has_a_golden_example() -> None:
    """Every sentence of the catalogue's answer and matrix blocks (the parser's only wording) has its example."""
    assert set(ERRORS) | BACKSTOPS == {key for key in EN if key.startswith(("answer.", "matrix."))}


@pytest.mark.parametrize("key", sorted(ERRORS))
def test_error_messages(key: str) -> None:
    fn, arg, message = ERRORS[key]
    with pytest.raises(AnswerError) as info:
        fn(arg)  # type: ignore[operator]
    assert str(info.value) == message
    assert "\n" not in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("2e", 'unexpected "e" at column 2'),  # no implicit multiplication by a name (2e3 is a number)
        ("2 3", 'unexpected "3" at column 3'),
        ("1.2.3", 'unexpected ".3" at column 4'),
        ("sqrt2", 'unknown name "sqrt2"'),
        ("()", 'unmatched ")" at column 2'),
        ("sqrt(-1)", "square root of a negative number at column 1"),
        ("(-4)^(1/2)", "square root of a negative number at column 5"),
        ("0^-1", "division by zero at column 2"),
        ("1/(sqrt(2) - sqrt(2))", "division by zero at column 2"),
        ("1/((1 + sqrt(2))^2 - 3 - 2*sqrt(2))", "division by zero at column 2"),  # zero sympy leaves unsimplified
        ("inf + 1", "must stand alone"),
        ("exp(inf)", "must stand alone"),
        ("2*oo", "must stand alone"),  # oo alone is infinity (issue 8, B.6); in an expression it is not
        ("NaN", "is not a number"),
        ("2^e", "needs a whole-number or half exponent"),
        ("2^sqrt(2)", "needs a whole-number or half exponent"),
        ("1e-400*1e-400*1e400*1e400/1e-300", "too large"),
        ("(10^50)^64", "too large"),
        ("((1 + 1/" + "9" * 40 + ")^64)^64", "too large"),
        ("((1 + sqrt(2))^64)^64", "too large"),
        ("exp(exp(exp(5)))", "argument of exp"),
        ("1,5", 'unexpected character ","'),  # no decimal comma
        ("٣", 'unexpected character "٣"'),  # only ASCII digits
        ("1\x00", 'unexpected character "\\x00" at column 2 in "1\\x00"'),
    ],
)
def test_errors_name_what_and_where(text: str, fragment: str) -> None:
    with pytest.raises(AnswerError) as info:
        parse_entry(text)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


# --- resources: every guard answers fast --------------------------------------------------

SLOW_CANDIDATES = [
    "9^9^9^9",
    "2^64^64",
    "9" * 2000,
    "1e99999999999999999999",
    "1e-99999999999999999999",
    "(" * 1000 + "1" + ")" * 999,
    "(" * 2000,
    "-" * 1999 + "1",
    "sqrt(" * 400,
    "√" * 1999 + "2",
    "exp(" * 49 + "1" + ")" * 49,
    "(((10^60)^64)^64)^64",
    "*".join(["(" + "9" * 90 + "/" + "7" * 90 + ")^2"] * 10),
    "sqrt(" + "9" * 99 + "7)*sqrt(" + "8" * 99 + "3)",
    "+".join(f"exp({i}/7)" for i in range(1, 190)),
    "+".join(f"sqrt({i})" for i in range(1, 190)),
    "+".join(f"1/{p}" for p in range(1000, 1330)),
    "2^-64^2",
    "0.000000001^64",
]


@pytest.mark.parametrize("text", SLOW_CANDIDATES, ids=range(len(SLOW_CANDIDATES)))
def test_pathological_input_is_refused_or_graded(text: str) -> None:
    """Each is refused with the parser's own error or parsed to a finite value.  How fast
    is benchmarks/answers_budget.py's business (no timing assertion here)."""
    try:
        entry = parse_entry(text)
    except AnswerError as err:
        assert "\n" not in str(err)
        return
    assert math.isfinite(entry.value())


def test_big_but_fine_values_parse() -> None:
    assert parse_entry("10^60 * 10^60 * 10^60 * 10^60 * 10^60").expr == Integer(10) ** 300
    assert parse_entry("exp(-1000)").expr == exp(-1000)
    assert parse_entry("exp(-1000)").value() == 0.0  # underflows as a float
    assert parse_entry("1e-400").expr == Rational(1, 10**400)
    assert parse_entry("1e-200*1e-200/1e-390").expr == Rational(1, 10**10)  # float shadow underflow recovered
    assert parse_entry("(" * 24 + "1" + ")" * 24).expr == 1


# --- nothing is ever run ---------------------------------------------------------------

CODE = [
    "__import__('os').system('touch {marker}')",
    "__import__(\"os\").system(\"touch {marker}\")",
    "open('{marker}', 'w')",
    "exec(\"open('{marker}', 'w')\")",
    "eval('1')",
    "().__class__",
    "().__class__.__bases__[0].__subclasses__()",
    "lambda: 1",
    "(lambda: 1)()",
    "[1][0]",
    "{{1: 2}}[1]",
    "sqrt.__globals__",
    "e.real",
    "f'{{1}}'",
    "(x := 1)",
    "1 if 1 else 2",
    "x",
    "pi",
    "I",
    "Integer(1)",
    "sympify('1')",
    "S('1')",
    "Symbol('x')",
    "1j",
    "True",
    "None",
    "1 and 2",
    "not 1",
    "1 < 2",
    "2 % 3",
    "2 // 3",
    "~1",
    "1 << 2",
    "@",
    "`touch {marker}`",
    "$(touch {marker})",
    "1; import os",
]


@pytest.mark.parametrize("template", CODE)
def test_code_is_never_run(template: str, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    text = template.format(marker=marker)
    with pytest.raises(AnswerError):
        parse_entry(text)
    try:
        parse_matrix(text)
    except AnswerError:
        pass
    assert not marker.exists()


def test_source_never_evaluates_or_sympifies_text() -> None:
    """No module of the answer package calls any of the text-evaluating functions."""
    files = sorted((ROOT / "tutor" / "answers").glob("*.py"))
    assert {f.name for f in files} >= {"grammar.py", "matrix.py", "entry.py", "values.py", "grading.py"}
    forbidden = {"eval", "exec", "compile", "__import__", "sympify", "parse_expr", "S", "N", "nsimplify", "lambdify"}
    called = set()
    for node in (n for f in files for n in ast.walk(ast.parse(f.read_text(encoding="utf-8")))):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name):
                called.add(f.id)
            elif isinstance(f, ast.Attribute) and not (isinstance(f.value, ast.Name) and f.value.id == "re"):
                called.add(f.attr)  # re.compile builds a regular expression, not code
    assert "Rational" in called  # the walk sees the calls
    assert not called & forbidden


def test_sympy_never_receives_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sympy's converter, which parses strings, never sees a str from us."""
    sympify_module = sys.modules["sympy.core.sympify"]
    real = sympify_module.sympify

    def guarded(a: object, *args: object, **kwargs: object) -> object:
        assert not isinstance(a, str), f"sympify got text {a!r}"
        return real(a, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(sympify_module, "sympify", guarded)
    for text, _ in EXACT:
        parse_entry(text)
    for text, _, _ in DECIMALS:
        parse_entry(text)
    parse_matrix("[[1, -inf], [0.45, sqrt(2)/2]]")


def test_import_does_not_load_sympy() -> None:
    code = "import sys, tutor.answers; print('sympy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --- matrices ------------------------------------------------------------------------

Q = [["1", "1"], ["2", "2"], ["2", "2"]]


@pytest.mark.parametrize(
    "text",
    [
        "1 1; 2 2; 2 2",
        "1 1;2 2;2 2;",
        "1, 1; 2, 2; 2, 2",
        "1,1;2,2;2,2",
        "[[1,1],[2,2],[2,2]]",
        "[[1, 1], [2, 2], [2, 2]]",
        "[1, 1], [2, 2], [2, 2]",
        "[1 1] [2 2] [2 2]",
        "[[1 1]\n [2 2]\n [2 2]]",  # numpy's print
        "[1 1; 2 2; 2 2]",  # MATLAB
        "1 1\n2 2\n2 2\n",
        "1 1\r\n\r\n2 2\r\n2 2",  # blank rows are ignored
        "  1   1 ;\t2 2 ; 2  2  ",
    ],
)
def test_matrix_formats(text: str) -> None:
    assert texts(parse_matrix(text)) == Q


def test_matrix_values() -> None:
    m = parse_matrix("[[1/(1 + 2*exp(sqrt(2))), -inf], [0.45, sqrt(2)/2]]")
    assert same(m[0][0].expr, 1 / (1 + 2 * exp(sqrt(2))))
    assert m[0][1].expr == -oo
    assert (m[1][0].expr, m[1][0].places) == (Rational(9, 20), 2)
    assert m[1][1].expr == sqrt(2) / 2


@pytest.mark.parametrize(
    ("row", "entries"),
    [
        ("1 -1", ["1", "-1"]),  # a sign glued to a number starts an entry
        ("1 - 1", ["1 - 1"]),  # a spaced operator joins
        ("1 -  1", ["1 -  1"]),
        ("1- 1", ["1- 1"]),
        ("1 +1", ["1", "+1"]),
        ("1 + 1", ["1 + 1"]),
        ("1 - -1", ["1 - -1"]),
        ("1 -1 -1", ["1", "-1", "-1"]),
        ("2 * 3", ["2 * 3"]),
        ("2 *3 4", ["2 *3", "4"]),
        ("2* 3", ["2* 3"]),
        ("2 ** 3", ["2 ** 3"]),
        ("2 ^ 3", ["2 ^ 3"]),
        ("1 / 3 2", ["1 / 3", "2"]),
        ("2 × 3", ["2 × 3"]),
        ("1 − 1", ["1 − 1"]),
        ("1 −1", ["1", "−1"]),
        ("1/(1 + 2*exp(sqrt(2))) 3", ["1/(1 + 2*exp(sqrt(2)))", "3"]),
        ("sqrt (2) 3", ["sqrt (2)", "3"]),
        ("√ 2 3", ["√ 2", "3"]),
        ("e -1", ["e", "-1"]),
        ("-inf -inf 0", ["-inf", "-inf", "0"]),
        ("2 (3)", ["2", "(3)"]),
        ("1 + 2, 3", ["1 + 2", "3"]),  # any comma: commas separate
        ("1 -1, 2", ["1 -1", "2"]),
        ("f(1, 2) 3", ["f(1, 2)", "3"]),  # commas inside parentheses do not count
    ],
)
def test_entry_separator_rule(row: str, entries: list[str]) -> None:
    assert split_entries(row) == entries


def test_separator_rule_values() -> None:
    assert [e.expr for e in parse_row("1 -1")] == [1, -1]
    assert [e.expr for e in parse_row("1 - 1")] == [0]
    assert [e.expr for e in parse_row("1 - -1 2")] == [2, 2]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1 1", ["1", "1"]),
        ("1, 1/2", ["1", "1/2"]),
        ("[1, 1/2]", ["1", "1/2"]),
        ("[1, 1/2],", ["1", "1/2"]),  # a pasted line of [[1, 1/2],\n [...]]
        ("[[1, 1/2]]", ["1", "1/2"]),
        ("  0.11 0.45 0.45 ", ["0.11", "0.45", "0.45"]),
    ],
)
def test_parse_row(text: str, expected: list[str]) -> None:
    assert [e.text for e in parse_row(text)] == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1 2; 3", "row 2 has 1 entry, but row 1 has 2"),
        ("[[1, 2], [3]]", "row 2 has 1 entry, but row 1 has 2"),
        ("1 2\n3 4\n5", "row 3 has 1 entry, but row 1 has 2"),
        ("1 2; 3 4 5", "row 2 has 3 entries, but row 1 has 2"),
        ("1,2;3,,4", "row 2, entry 2 is empty"),
        ("[1, 2]]", 'unmatched "]" at column 7'),
        ("[[1, 2], [3, [4]]]", "brackets nested too deeply at column 14 (a matrix is [[1, 2], [3, 4]])"),
        ("1 2; 3 (4", 'row 2, entry 2: the "(" at column 1 in "(4" is never closed'),
        ("1 2; 3 (4;5)", 'row 2, entry 2: unexpected character ";" at column 3 in "(4;5)"'),
        ("1 2; 3 4)", 'row 2, entry 2: unmatched ")" at column 2 in "4)"'),
        (" ", "no answer given"),
        ("[]", "no rows given"),
        ("[[]]", "row 1 is empty"),
    ],
)
def test_matrix_errors(text: str, message: str) -> None:
    with pytest.raises(AnswerError) as info:
        parse_matrix(text)
    assert str(info.value) == message


def test_matrix_size_limits() -> None:
    big = "; ".join([" ".join(["1/(1 + 2*exp(sqrt(2)))"] * 32)] * 16)  # the largest scores-like step
    m = parse_matrix(big)  # its time: benchmarks/answers_budget.py (a full-size matrix line)
    assert (len(m), len(m[0])) == (16, 32)
    assert all(e.value() == pytest.approx(1 / (1 + 2 * math.exp(math.sqrt(2))), rel=1e-15) for row in m for e in row)
    with pytest.raises(AnswerError, match="at most 100000"):
        parse_matrix("1 " * 50_001)


# --- values a YAML reader hands over ---------------------------------------------------


class YNum(str):
    """Like the YAML reader's: a plain scalar's text, typed as a number."""


@pytest.mark.parametrize(
    ("value", "expr", "exact", "places"),
    [
        (3, Integer(3), True, None),
        (-2, Integer(-2), True, None),
        (0.45, Rational(9, 20), False, 2),
        (0.1, Rational(1, 10), False, 1),  # from repr, never the binary value
        (1e-05, Rational(1, 100000), False, 5),
        (float("-inf"), -oo, True, None),
        ("1/3", Rational(1, 3), True, None),
        ("sqrt(2)/2", sqrt(2) / 2, True, None),
        ("-inf", -oo, True, None),
        (YNum("0.4500"), Rational(9, 20), False, 4),  # the text keeps its places
        (YNum("-.inf"), -oo, True, None),
        (YNum("1e3"), Integer(1000), False, -3),
    ],
)
def test_entry_from_value(value: object, expr: sympy.Expr, exact: bool, places: int | None) -> None:
    entry = entry_from_value(value)
    assert entry.expr == expr
    assert (entry.is_exact, entry.places) == (exact, places)
    assert type(entry.text) is str


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (True, "true is not a number"),
        (False, "false is not a number"),
        (None, "found nothing (null)"),
        ([1], "found a list"),
        ({"a": 1}, "found a mapping"),
        (float("nan"), '"nan" is not a number, and no value asked for here is NaN'),
        (b"1", "found bytes"),
        ("1:20", 'unexpected character ":"'),  # YAML 1.1 base 60 is not a number
        ("0x10", 'unexpected "x10" at column 2'),  # no hexadecimal
        ("yes", 'unknown name "yes"'),
    ],
)
def test_entry_from_value_refuses(value: object, message: str) -> None:
    with pytest.raises(AnswerError) as info:
        entry_from_value(value)
    assert message in str(info.value)


def test_matrix_from_value() -> None:
    m = matrix_from_value([[1, "1/2"], [0.25, "-inf"]])
    assert [[e.expr for e in row] for row in m] == [[1, Rational(1, 2)], [Rational(1, 4), -oo]]
    with pytest.raises(AnswerError, match="^row 2 has 1 entry, but row 1 has 2$"):
        matrix_from_value([[1, 2], [3]])
    with pytest.raises(AnswerError, match="^row 2, entry 1: true is not a number"):
        matrix_from_value([[1], [True]])
    with pytest.raises(AnswerError, match="^row 1 is empty$"):
        matrix_from_value([[]])
    with pytest.raises(AnswerError, match="^no rows given$"):
        matrix_from_value([])


# --- comparisons -----------------------------------------------------------------------


def _rat(p: int, q: int = 1):
    from fractions import Fraction

    from tutor.exact.numbers import Rat

    return Rat(Fraction(p, q))


def _first_weight():
    """The classic's first weight, 1/(1 + 2·exp(√2)) = 0.10838…, as the exact engine has it."""
    from tutor.exercise.catalog import resolve
    from tutor.steps import solve

    return solve(resolve("single-head-3x4")).step("weights", 0).exact[0][0]


def test_a_decimal_claims_its_rounding_and_nothing_more() -> None:
    """Issue 11: 0.1044 for 0.10838 is wrong (it claims [0.10435, 0.10445]); a fixed ±0.005 said right."""
    w = _first_weight()
    assert abs(w.value() - 1 / (1 + 2 * math.exp(math.sqrt(2)))) < 1e-15
    assert not judge(parse_entry("0.1044"), w).right
    assert judge(parse_entry("0.1084"), w).right  # [0.10835, 0.10845] holds 0.10838
    assert judge(parse_entry("0.11"), w).right and judge(parse_entry("0.108"), w).right
    assert not judge(parse_entry("0.12"), w).right
    assert judge(parse_entry("0.1"), w).right  # [0.05, 0.15]: right by the rule; practice asks for more places
    # an edge is inside: 0.455 lies in the claim of 0.45 and of 0.46 ([0.445, 0.455], [0.455, 0.465])
    assert judge(parse_entry("0.45"), _rat(91, 200)).right and judge(parse_entry("0.46"), _rat(91, 200)).right
    assert not judge(parse_entry("0.45"), _rat(4551, 10000)).right
    # --tolerance replaces the interval of a decimal
    assert judge(parse_entry("0.1"), _rat(1, 5), tolerance=0.1).right
    assert not judge(parse_entry("0.1044"), w, tolerance=0.001).right and judge(parse_entry("0.1044"), w, tolerance=0.005).right


def test_practice_asks_for_two_decimals_for_a_value_that_is_not_an_integer() -> None:
    w = _first_weight()
    assert practice_verdict(judge(parse_entry("0.1"), w)) == "coarse"  # holds the value, but coarser than 2 places
    assert practice_verdict(judge(parse_entry("0.2"), w)) == "wrong"  # [0.15, 0.25] does not hold it
    assert practice_verdict(judge(parse_entry("0.11"), w)) == "right"
    # a whole number is an exact form, in practice as in check (fix-rope, F20): wrong unless exactly equal
    assert practice_verdict(judge(parse_entry("0"), w)) == "wrong"
    assert practice_verdict(judge(parse_entry("1"), _rat(9965, 10000))) == "wrong"
    assert judge(parse_entry("1"), _rat(9965, 10000)).near  # close: the note says an exact form must be exact
    assert practice_verdict(judge(parse_entry("1"), w)) == "wrong"  # 1 is 0.89 from 0.108
    assert practice_verdict(judge(parse_entry("2"), _rat(2))) == "right"  # an integer value wants no decimals
    assert practice_verdict(judge(parse_entry("2.0"), _rat(2))) == "right"
    assert practice_verdict(judge(parse_entry("0.1"), w, tolerance=0.05)) == "right"  # --tolerance: no places asked


def test_truncation_is_named_when_it_explains_the_answer() -> None:
    w = _first_weight()  # 0.10838: rounded to 2 places 0.11, cut 0.10
    assert judge(parse_entry("0.10"), w).truncated
    assert not judge(parse_entry("0.11"), w).truncated  # right
    assert not judge(parse_entry("0.09"), w).truncated  # wrong, but not the value cut off
    assert judge(parse_entry("0.108"), w).right  # 0.10838 to 3 places rounds and cuts alike
    assert judge(parse_entry("-0.10"), _rat(-1084, 10000)).truncated  # cut towards zero
    assert not judge(parse_entry("0.1"), _rat(1, 10)).truncated


def test_exact_entries_must_be_exact() -> None:
    w = _first_weight()
    assert judge(parse_entry("1/(1 + 2*exp(sqrt(2)))"), w).right
    assert not judge(parse_entry("1/9"), w).right  # 0.111: within 0.005, but claims exactly 1/9
    assert judge(parse_entry("1/9"), w).near
    assert judge(parse_entry("1/3"), _rat(1, 3)).right
    assert not judge(parse_entry("1/3"), _rat(3333, 10000)).right
    assert judge(parse_entry("0"), _rat(0)).right
    assert not judge(parse_entry("1000000001/1000000000"), _rat(1)).right
    assert judge(parse_entry("sqrt(2)/2"), _first_weight_surd()).right


def _first_weight_surd():
    from fractions import Fraction

    from tutor.exact.numbers import surd

    return surd(Fraction(1, 2), 2)


def test_infinities_match_only_themselves() -> None:
    from tutor.exact.numbers import NegInf

    assert judge(parse_entry("-inf"), NegInf()).right
    assert not judge(parse_entry("-1e300"), NegInf()).right
    assert not judge(parse_entry("-1000.0"), NegInf(), tolerance=1e6).right
    assert not judge(parse_entry("-inf"), _rat(0)).right


@pytest.mark.parametrize(
    ("text", "lo", "hi"),
    [
        ("0.45", 0.445, 0.455),
        ("0.4500", 0.44995, 0.45005),
        ("-0.45", -0.455, -0.445),
        ("0.11", 0.105, 0.115),
        ("2.", 1.5, 2.5),
        ("1e-3", 0.0005, 0.0015),
        ("1.5E2", 145.0, 155.0),
        ("1/2", 0.5, 0.5),
        ("3", 3.0, 3.0),
        ("1.41/2", 0.7, 0.71),  # an expression: ± half a unit of its least precise decimal (1.41: 2 places)
        ("-inf", -math.inf, -math.inf),
    ],
)
def test_claim(text: str, lo: float, hi: float) -> None:
    assert claim(parse_entry(text)) == pytest.approx((lo, hi), abs=1e-15)


# --- properties ---------------------------------------------------------------------

FAST = settings(deadline=timedelta(milliseconds=1500), max_examples=400, suppress_health_check=[HealthCheck.too_slow])

PIECES = [
    "0", "1", "2", "9", "10", "99999999", "0.5", ".5", "1.", "1e", "e9", "1e-3", "E", "e",
    "+", "-", "−", "*", "**", "/", "^", "×", "·", "÷", "√", "(", ")", "((", "))",
    "sqrt", "exp", "sqrt(", "exp(", "inf", "∞", "nan", "oo", "pi", "x", "I",
    "__import__", "'os'", ".", ",", ";", ":", "=", ":=", "[", "]", "{", "}", "lambda", "f'",
    " ", "  ", "\t", "\n", "\x00", "é", "٣", "🙂",
]  # fmt: skip
soup = st.lists(st.sampled_from(PIECES), max_size=40).map("".join)
any_text = st.one_of(st.text(max_size=80), soup)


@FAST
@given(any_text)
def test_parse_entry_returns_an_entry_or_its_own_error(text: str) -> None:
    try:
        entry = parse_entry(text)
    except AnswerError as err:
        assert "\n" not in str(err)
        event("error")
        return
    event("entry")
    assert isinstance(entry, Entry)
    v = entry.value()
    assert isinstance(v, float) and not math.isnan(v)
    assert math.isinf(v) or abs(v) <= answers.MAX_MAGNITUDE


@FAST
@given(any_text)
def test_parse_matrix_returns_a_rectangle_or_its_own_error(text: str) -> None:
    try:
        m = parse_matrix(text)
    except AnswerError as err:
        assert "\n" not in str(err)
        event("error")
        return
    event("matrix")
    assert m and all(len(row) == len(m[0]) > 0 for row in m)
    assert all(isinstance(e, Entry) for row in m for e in row)


@FAST
@given(any_text)
def test_parse_row_returns_entries_or_its_own_error(text: str) -> None:
    try:
        row = parse_row(text)
    except AnswerError:
        return
    assert row and all(isinstance(e, Entry) for e in row)


@FAST
@given(st.recursive(st.one_of(st.integers(), st.floats(), st.text(max_size=20), st.booleans(), st.none()),
                    lambda inner: st.lists(inner, max_size=4), max_leaves=20))  # fmt: skip
def test_values_from_yaml_are_entries_or_errors(value: object) -> None:
    try:
        matrix_from_value(value)
    except AnswerError:
        pass
    try:
        entry_from_value(value)
    except AnswerError:
        pass


# A tiny grammar with an independent oracle: each node carries its text (with
# only the parentheses precedence needs) and its value built by sympy's own
# constructors.  REFUSE marks a value the parser must refuse (a square root of
# a negative number, a division by zero); SKIP one beyond the parser's
# magnitude guards, which the oracle does not model.
REFUSE, SKIP = "refuse", "skip"
Node = tuple[str, int, object, bool]  # text, precedence, value (or REFUSE/SKIP), has a decimal
ATOM, POWER, UNARY, PRODUCT, SUM = 5, 4, 3, 2, 1
DECIMAL_LEAVES = [
    ("0.5", Rational(1, 2)),
    ("0.25", Rational(1, 4)),
    ("1.5", Rational(3, 2)),
    (".75", Rational(3, 4)),
    ("2.0", Integer(2)),
    ("1e-1", Rational(1, 10)),
    ("0.125", Rational(1, 8)),
]


def wrap(node: Node, at_least: int) -> str:
    return node[0] if node[1] >= at_least else f"({node[0]})"


def node(text: str, prec: int, value: object, decimal: bool) -> Node:
    if isinstance(value, sympy.Expr) and abs(value.evalf(20)) > 1e200:
        value = SKIP
    return (text, prec, value, decimal)


def values(*nodes: Node) -> list[sympy.Expr] | str:
    """The children's values, or SKIP/REFUSE if any child has one (SKIP wins)."""
    vs = [n[2] for n in nodes]
    if SKIP in vs:
        return SKIP
    if REFUSE in vs:
        return REFUSE
    return vs  # type: ignore[return-value]


leaves = st.one_of(
    st.integers(0, 12).map(lambda n: (str(n), ATOM, Integer(n), False)),
    st.sampled_from([("e", E), ("E", E)]).map(lambda p: (p[0], ATOM, p[1], False)),
    st.integers(0, 50).map(lambda n: (f"sqrt({n})", ATOM, sqrt(n), False)),
    st.integers(0, 50).map(lambda n: (f"√{n}", ATOM, sqrt(n), False)),
    st.sampled_from(DECIMAL_LEAVES).map(lambda p: (p[0], ATOM, p[1], True)),
)


def combine(children: st.SearchStrategy[Node]) -> st.SearchStrategy[Node]:
    def binary(op: str, a: Node, b: Node) -> Node:
        prec = SUM if op in "+-" else PRODUCT
        text = f"{wrap(a, prec)} {op} {wrap(b, prec + 1)}"
        vs = values(a, b)
        if isinstance(vs, str):
            return node(text, prec, vs, a[3] or b[3])
        va, vb = vs
        if op == "+":
            value: object = sympy.Add(va, vb)
        elif op == "-":
            value = sympy.Add(va, sympy.Mul(-1, vb))
        elif op == "*":
            value = sympy.Mul(va, vb)
        else:
            value = REFUSE if vb.equals(0) else sympy.Mul(va, sympy.Pow(vb, -1))
        return node(text, prec, value, a[3] or b[3])

    def negate(a: Node) -> Node:
        vs = values(a)
        return node(f"-{wrap(a, POWER)}", UNARY, vs if isinstance(vs, str) else sympy.Mul(-1, vs[0]), a[3])

    def power(a: Node, n: int) -> Node:
        text = f"{wrap(a, ATOM)}^{n}" if n >= 0 else f"{wrap(a, ATOM)}^({n})"
        vs = values(a)
        if isinstance(vs, str):
            return node(text, POWER, vs, a[3])
        return node(text, POWER, REFUSE if n < 0 and vs[0].equals(0) else sympy.Pow(vs[0], n), a[3])

    def root(a: Node) -> Node:
        vs = values(a)
        if isinstance(vs, str):
            return node(f"sqrt({a[0]})", ATOM, vs, a[3])
        negative = vs[0].evalf(30) < -1e-20
        return node(f"sqrt({a[0]})", ATOM, REFUSE if negative else sympy.sqrt(vs[0]), a[3])

    def exponential(a: Node) -> Node:
        vs = values(a)
        if isinstance(vs, str):
            return node(f"exp({a[0]})", ATOM, vs, a[3])
        too_far = abs(vs[0].evalf(20)) > 600  # the parser refuses |argument| > 1000
        return node(f"exp({a[0]})", ATOM, SKIP if too_far else sympy.exp(vs[0]), a[3])

    return st.one_of(
        st.builds(binary, st.sampled_from("+-*/"), children, children),
        st.builds(negate, children),
        st.builds(power, children, st.integers(-2, 3)),
        st.builds(root, children),
        st.builds(exponential, children),
    )


expressions = st.recursive(leaves, combine, max_leaves=6)


@settings(deadline=timedelta(milliseconds=3000), max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(expressions)
def test_generated_expressions_parse_to_their_value(tree: Node) -> None:
    text, _, value, has_decimal = tree
    assume(value != SKIP and len(text) <= answers.MAX_ENTRY_CHARS)
    event("refused" if value == REFUSE else "parsed")
    if value == REFUSE:  # the parser must refuse it, with its own error
        with pytest.raises(AnswerError):
            parse_entry(text)
        return
    assert isinstance(value, sympy.Expr)
    approx = value.evalf(30)
    assume(approx.is_real and approx.is_finite and abs(approx) < 1e100)
    entry = parse_entry(text)
    assert entry.is_exact is not has_decimal
    got = entry.expr.evalf(40)
    assert abs(got - approx) <= 1e-25 * max(1, abs(approx)), (text, entry.expr, value)
    if value.is_Rational:
        assert entry.expr == value


@pytest.mark.parametrize(
    "text",
    [
        "1/(1 + 2*exp(sqrt(2)))",
        "(4 + exp(-sqrt(2)))/(2 + exp(-sqrt(2)))",
        "3*sqrt(2)/4",
        "-sqrt(2)/2",
        "exp(-3/2)",
        "e",
    ],
)
def test_printed_exact_forms_round_trip(text: str) -> None:
    """What sympy prints for a parsed entry parses back to the same value
    (the forms the exact engine shows are the forms a learner copies)."""
    first = parse_entry(text).expr
    again = parse_entry(sympy.sstr(first)).expr
    assert same(first, again)


def mutate(tree: Node, where: int, piece: str) -> str:
    """Replace one character of a valid expression with a soup piece."""
    text = tree[0]
    i = where % (len(text) + 1)
    return text[:i] + piece + text[i + 1 :]


@FAST
@given(st.builds(mutate, expressions, st.integers(0, 400), st.sampled_from([*PIECES, ""])))
def test_near_valid_text_returns_an_entry_or_its_own_error(text: str) -> None:
    try:
        parse_entry(text)
    except AnswerError:
        event("error")
        return
    event("entry")


valid = expressions.filter(lambda t: isinstance(t[2], sympy.Expr) and len(t[0]) < 200)


@settings(deadline=timedelta(milliseconds=5000), max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(1, 3).flatmap(lambda cols: st.lists(st.lists(valid, min_size=cols, max_size=cols), min_size=1, max_size=3)),
    st.sampled_from([", ", ",", " ", "   "]),
    st.sampled_from(["; ", ";", "\n", "brackets"]),
)
def test_generated_matrices_parse_entry_by_entry(rows: list[list[Node]], between: str, rows_as: str) -> None:
    """Joined with commas, or with bare spaces under the separator rule, the
    generated entries come back one for one, each with its value."""
    lines = [between.join(n[0] for n in row) for row in rows]
    text = "[" + ", ".join(f"[{line}]" for line in lines) + "]" if rows_as == "brackets" else rows_as.join(lines)
    m = parse_matrix(text)
    assert [len(r) for r in m] == [len(r) for r in rows]
    for got_row, want_row in zip(m, rows, strict=True):
        for got, want in zip(got_row, want_row, strict=True):
            assert got.text == want[0]
            value = want[2]
            assert isinstance(value, sympy.Expr)
            assert abs(got.expr.evalf(30) - value.evalf(30)) <= 1e-20 * max(1, abs(value.evalf(30)))


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2√2", 2 * sympy.sqrt(2)),  # exactly as explain's tables print it
        ("3√2/2", 3 * sympy.sqrt(2) / 2),
        ("-2√2", -2 * sympy.sqrt(2)),
        ("2sqrt(2)", 2 * sympy.sqrt(2)),
        ("2exp(-√2)", 2 * sympy.exp(-sympy.sqrt(2))),
        ("2(1 + e)", 2 + 2 * sympy.E),
        ("1/(1 + 2·exp(√2))", 1 / (1 + 2 * sympy.exp(sympy.sqrt(2)))),
    ],
)
def test_implicit_multiplication_before_a_root_exp_or_parenthesis(text, expected):
    assert sympy.simplify(parse_entry(text).expr - expected) == 0


@pytest.mark.parametrize(("text", "row"), [("1 1;;2 2; 2 2", 2), (";1 1", 1), ("[1 2;; 3 4]", 2), ("1 1; ; 2 2", 2)])
def test_an_empty_row_between_semicolons_is_an_error(text, row):
    with pytest.raises(AnswerError, match=f'^row {row} is empty \\(two ";" in a row\\?\\); write every row$'):
        parse_matrix(text)


@pytest.mark.parametrize("text", ["1 1; 2 2;", "1 1\n\n2 2", "1 1;\n2 2\n"])
def test_a_trailing_semicolon_and_blank_lines_are_fine(text):
    assert [[e.value() for e in row] for row in parse_matrix(text)] == [[1, 1], [2, 2]]


@pytest.mark.parametrize("text", [
    "; ".join([", ".join(["exp(√2)/(1+2·exp(√3))"] * 64)] * 65),  # found by the fuzz test: 65 rows of 64
    "[" + ", ".join(["[" + ", ".join(["1/3"] * 4000) + "]", "[" + ", ".join(["1/3"] * 97) + "]"]) + "]",  # 4,000 + 97
])
def test_a_matrix_with_too_many_entries_is_refused_before_any_entry_is_parsed(text, monkeypatch) -> None:
    """Issue 8 (refused at once, never graded late): the count of entries is known from the
    split text, so no entry is parsed first (it was: 4,095 entries of 65 rows, then refused)."""
    parsed: list[str] = []
    monkeypatch.setattr(answers, "parse_entry", lambda entry_text: parsed.append(entry_text))
    with pytest.raises(AnswerError, match="more than 4096 entries"):
        parse_matrix(text)
    assert parsed == []


def test_refusals_list_every_name_the_grammar_accepts():
    """The unknown-name and logarithm refusals name every function the grammar reads (cos and sin
    were accepted but left out of both lists): each name in the table parses, and each is listed."""
    from tutor.answers import grammar

    for name in grammar.FUNCTIONS:
        parse_entry(f"{name}(0)")
    for text in ("2*pi", "log(2)"):
        with pytest.raises(AnswerError) as info:
            parse_entry(text)
        shown = str(info.value)
        for name in (*grammar.FUNCTIONS, *grammar.CONSTANTS):
            assert f"{name}," in shown or f"{name})" in shown, (name, shown)
