"""The exercise loader: every kind of bad input the contract names, and the good ones.

Each bad input asserts the exact ``file:line:column``, the field and a key
phrase of the message.  Line and column numbers were counted by hand in the
texts below (1-based); ``BASE`` is seven lines long, so an appended field
starts on line 8.
"""

from __future__ import annotations

import os
import re
import time
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

from tutor.base.errors import ExerciseError, Problem
from tutor.exercise import load_exercise, parse_exercise

REPO = Path(__file__).resolve().parent.parent
EXERCISES = REPO / "exercises"
BUNDLED = sorted(EXERCISES.glob("*.yaml"))

BASE = (
    "id: t\n"  # 1
    "title: T\n"  # 2
    "x: [[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]]\n"  # 3: x[0][0] is at column 6
    "heads:\n"  # 4
    "  - w_q: [[1, 0], [1, 0], [0, 1], [0, 1]]\n"  # 5: the value of w_q starts at column 10
    "    w_k: [[1, 0], [1, 0], [0, 1], [0, 1]]\n"  # 6
    "    w_v: [[1, 0], [1, 0], [0, 1], [0, 1]]\n"  # 7
)
HEAD = BASE[: BASE.index("heads:")]  # id, title, x: three lines
ONE_HEAD = BASE[BASE.index("heads:"):]


def problems(text: str, filename: str = "f.yaml") -> list[Problem]:
    with pytest.raises(ExerciseError) as info:
        parse_exercise(text, filename)
    assert info.value.problems, "an ExerciseError must hold at least one problem"
    assert str(info.value) == "\n".join(str(p) for p in info.value.problems)
    return info.value.problems


def only(text: str) -> Problem:
    found = problems(text)
    assert len(found) == 1, found
    return found[0]


def where(p: Problem) -> tuple[str, int | None, int | None, str]:
    return (p.file, p.line, p.column, p.field)


def with_x00(entry: str) -> str:
    """BASE with x[0][0] (line 3, column 6) written as ``entry``."""
    return BASE.replace("x: [[1, 0, 1, 0]", f"x: [[{entry}, 0, 1, 0]", 1)


def mat(rows: int, cols: int) -> str:
    return "[" + ", ".join("[" + ", ".join(["1"] * cols) + "]" for _ in range(rows)) + "]"


# --- good input -------------------------------------------------------------


def test_base_loads_exactly():
    ex = parse_exercise(BASE, "f.yaml")
    assert ex.id == "t" and ex.title == "T"
    assert ex.x == tuple(tuple(map(Fraction, r)) for r in [[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]])
    assert (ex.L, ex.d_model, ex.num_heads, ex.heads[0].d_k, ex.heads[0].d_v) == (3, 4, 1, 2, 2)
    assert ex.mask is None and ex.key_padding is None and ex.w_o is None
    assert all(isinstance(v, Fraction) for row in ex.x for v in row)


@pytest.mark.parametrize(
    ("written", "value"),
    [
        ("1e3", Fraction(1000)),  # YAML 1.2: a float, read exactly
        ("'1e3'", Fraction(1000)),  # quoted: the same number
        ('"1E3"', Fraction(1000)),
        ("010", Fraction(10)),  # ten, not eight (YAML 1.1 octal)
        ('"1/3"', Fraction(1, 3)),
        ('"-2/5"', Fraction(-2, 5)),
        ("0.1", Fraction(1, 10)),  # exactly 1/10, not the binary float
        ("-0.25", Fraction(-1, 4)),
        ("+5", Fraction(5)),
        (".5", Fraction(1, 2)),
        ("2.5e-1", Fraction(1, 4)),
    ],
)
def test_numbers_are_read_exactly_by_yaml_1_2(written, value):
    ex = parse_exercise(with_x00(written), "f.yaml")
    assert ex.x[0][0] == value
    assert type(ex.x[0][0]) is Fraction


def test_point_one_is_not_the_binary_float():
    ex = parse_exercise(with_x00("0.1"), "f.yaml")
    assert ex.x[0][0] != Fraction(0.1)
    assert ex.x[0][0] * 10 == 1


def test_an_ordinary_alias_is_allowed():
    text = HEAD + (
        "heads:\n"
        "  - w_q: &w [[1, 0], [1, 0], [0, 1], [0, 1]]\n"
        "    w_k: *w\n"
        "    w_v: *w\n"
    )
    assert parse_exercise(text, "f.yaml").heads == parse_exercise(BASE, "f.yaml").heads


CONTRACT_CLASSIC = """\
id: single-head-3x4
title: "Three tokens, d_model = 4, one head with d_k = 2"
x: [[1, 0, 1, 0],
    [0, 2, 0, 2],
    [1, 1, 1, 1]]
heads:
  - w_q: [[1, 0], [1, 0], [0, 1], [0, 1]]
    w_k: [[1, 0], [1, 0], [0, 1], [0, 1]]
    w_v: [[1, 0], [1, 0], [0, 1], [0, 1]]
"""

CONTRACT_FUSED = """\
id: two-head-causal-3x4
title: "Two heads of d_k = 2, causal mask, output projection"
num_heads: 2
x: [[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]]
w_q: [[1, 0, 0, 1], [0, 1, 1, 0], [1, 0, 0, 1], [0, 1, 1, 0]]
w_k: [[1, 0, 1, 0], [0, 1, 0, 1], [1, 0, 1, 0], [0, 1, 0, 1]]
w_v: [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
w_o: [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
mask: causal
"""


def F(rows):
    return tuple(tuple(Fraction(v) for v in r) for r in rows)


def test_contract_example_classic_loads():
    ex = parse_exercise(CONTRACT_CLASSIC, "classic.yaml")
    assert ex.id == "single-head-3x4"
    assert (ex.L, ex.L_k, ex.d_model, ex.num_heads, ex.d_out) == (3, 3, 4, 1, 2)
    w = F([[1, 0], [1, 0], [0, 1], [0, 1]])
    assert ex.heads[0].w_q == ex.heads[0].w_k == ex.heads[0].w_v == w
    assert not ex.fused and ex.mask_kind == "none"


def test_contract_example_fused_loads_and_splits_by_columns():
    ex = parse_exercise(CONTRACT_FUSED, "fused.yaml")
    assert ex.fused and ex.num_heads == 2 and ex.mask_kind == "causal"
    # head h uses columns h*d_k:(h+1)*d_k of the fused weights, split by hand
    assert ex.heads[0].w_q == F([[1, 0], [0, 1], [1, 0], [0, 1]])
    assert ex.heads[1].w_q == F([[0, 1], [1, 0], [0, 1], [1, 0]])
    assert ex.heads[0].w_k == F([[1, 0], [0, 1], [1, 0], [0, 1]])
    assert ex.heads[1].w_k == F([[1, 0], [0, 1], [1, 0], [0, 1]])
    assert ex.heads[0].w_v == F([[1, 0], [0, 1], [0, 0], [0, 0]])
    assert ex.heads[1].w_v == F([[0, 0], [0, 0], [1, 0], [0, 1]])
    # causal: key j visible to query i iff j <= i
    assert ex.mask == ((True, False, False), (True, True, False), (True, True, True))
    assert ex.w_o == F([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])


def test_per_head_and_fused_forms_load_to_the_same_heads():
    per_head = """\
id: per-head
title: T
x: [[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]]
heads:
  - w_q: [[1, 0], [0, 1], [1, 0], [0, 1]]
    w_k: [[1, 0], [0, 1], [1, 0], [0, 1]]
    w_v: [[1, 0], [0, 1], [0, 0], [0, 0]]
    b_q: ["1/2", 0]
    b_v: [0, 1]
  - w_q: [[0, 1], [1, 0], [0, 1], [1, 0]]
    w_k: [[1, 0], [0, 1], [1, 0], [0, 1]]
    w_v: [[0, 0], [0, 0], [1, 0], [0, 1]]
    b_q: [0, -1]
    b_v: [2, 0.5]
mask: causal
"""
    fused = CONTRACT_FUSED.replace("w_o: [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]\n", "")
    fused += 'b_q: ["1/2", 0, 0, -1]\nb_v: [0, 1, 2, 0.5]\n'
    a, b = parse_exercise(per_head, "a.yaml"), parse_exercise(fused, "b.yaml")
    assert a.heads == b.heads
    assert a.heads[1].b_v == (Fraction(2), Fraction(1, 2))
    assert a.heads[0].b_k is None and b.heads[0].b_k is None
    assert (a.fused, b.fused) == (False, True)


@pytest.mark.parametrize("path", BUNDLED, ids=[p.stem for p in BUNDLED])
def test_bundled_exercise_loads_and_file_name_is_its_id(path):
    ex = load_exercise(str(path))
    assert ex.id == path.stem
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert ex.title == raw["title"]
    assert ex.L == len(raw["x"]) and ex.d_model == len(raw["x"][0])
    assert ex.num_heads == raw.get("num_heads", len(raw.get("heads", [])))


def test_at_least_six_bundled_exercises_with_unique_ids():
    ids = [load_exercise(str(p)).id for p in BUNDLED]
    assert len(ids) >= 6 and len(set(ids)) == len(ids)
    assert "single-head-3x4" in ids


def test_bundled_classic_is_the_contract_example():
    bundled = load_exercise(str(EXERCISES / "single-head-3x4.yaml"))
    contract = parse_exercise(CONTRACT_CLASSIC, "c.yaml")
    assert (bundled.x, bundled.heads) == (contract.x, contract.heads)


# --- YAML syntax and traps --------------------------------------------------


def test_malformed_yaml():
    p = only("id: t\ntitle: [a, b\nx: 1\n")
    assert where(p) == ("f.yaml", 3, 2, "")
    assert str(p.message).startswith("not valid YAML")


def test_malformed_yaml_unclosed_bracket_at_end():
    p = only(BASE + "tags: [a, b\n")
    assert (p.file, p.field) == ("f.yaml", "")
    assert p.line in (8, 9)
    assert "not valid YAML" in p.message


def test_two_documents_are_malformed():
    p = only("id: t\ntitle: T\n---\nid: u\n")
    assert where(p) == ("f.yaml", 3, 1, "")
    assert "not valid YAML" in p.message


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("id: t\n\ttitle: T\n", 2),
        (BASE.replace("  - w_q", "\t- w_q"), 5),
    ],
)
def test_tab_indentation(text, line):
    p = only(text)
    assert where(p) == ("f.yaml", line, 1, "")
    assert "tab" in p.message
    assert "spaces" in p.hint


def test_duplicate_key():
    p = only(BASE + "id: u\n")
    assert where(p) == ("f.yaml", 8, 1, "id")
    assert p.message == "duplicate key 'id' (first given at line 1)"


def test_duplicate_key_inside_a_head():
    p = only(BASE + "    w_q: [[1, 0], [1, 0], [0, 1], [0, 1]]\n")
    assert where(p) == ("f.yaml", 8, 5, "heads[0].w_q")
    assert "duplicate key 'w_q' (first given at line 5)" in p.message


def test_merge_key():
    text = "defaults: &d {id: t}\n<<: *d\n" + BASE[len("id: t\n"):]
    found = problems(text)
    merge = [p for p in found if "merge" in p.message]
    assert len(merge) == 1
    assert where(merge[0]) == ("f.yaml", 2, 1, "<<")
    assert "merge keys (<<) are not supported" in merge[0].message


def test_merge_key_inside_a_head():
    text = HEAD + (
        "heads:\n"
        "  - w_q: [[1, 0], [1, 0], [0, 1], [0, 1]]\n"
        "    <<: {w_k: [[1, 0], [1, 0], [0, 1], [0, 1]], w_v: [[1, 0], [1, 0], [0, 1], [0, 1]]}\n"
    )
    p = only(text)
    assert where(p) == ("f.yaml", 6, 5, "heads[0]")
    assert "merge keys" in p.message


ALIAS_BOMB = "".join(
    f"{name}: &{name} [{', '.join([prev] * 9)}]\n"
    for name, prev in zip("abcdefghi", ['"lol"', "*a", "*b", "*c", "*d", "*e", "*f", "*g", "*h"])
)  # 9^9 = 387 million strings once expanded


def test_alias_bomb_is_refused_quickly():
    start = time.perf_counter()
    p = only(ALIAS_BOMB)
    elapsed = time.perf_counter() - start
    assert elapsed < 3.0, f"the alias bomb took {elapsed:.1f} s"
    assert p.file == "f.yaml" and p.line is not None and p.column is not None
    assert "aliases expand to more than" in p.message


def test_recursive_alias():
    p = only(BASE + "tags: &t [a, *t]\n")
    # reported where the alias is written (issue 20, E: a problem through an alias is reported at the alias)
    assert where(p) == ("f.yaml", 8, 14, "tags[1]")
    assert "alias refers to the value that contains it" in p.message


def test_explicit_python_tag_is_refused_and_never_run(tmp_path):
    marker = tmp_path / "ran"
    text = BASE + f'description: !!python/object/apply:os.system ["touch {marker}"]\n'
    p = only(text)
    assert where(p) == ("f.yaml", 8, 14, "description")
    assert "YAML tag !!python/object/apply:os.system" in p.message
    assert not marker.exists()


@pytest.mark.parametrize(
    ("entry", "tag"),
    [("!!float 1", "!!float"), ("!!int 1", "!!int"), ("!!python/object:os.path 1", "!!python/object:os.path")],
)
def test_explicit_tag_on_an_entry(entry, tag):
    p = only(with_x00(entry))
    assert where(p) == ("f.yaml", 3, 6, "x[0][0]")
    assert f"found the YAML tag {tag}" in p.message


# --- entries ----------------------------------------------------------------

NUMBER = "expected a number"


@pytest.mark.parametrize(
    ("entry", "found", "hint"),
    [
        ("yes", "the text 'yes'", "YAML 1.1"),
        ("no", "the text 'no'", "YAML 1.1"),
        ("on", "the text 'on'", "YAML 1.1"),
        ("off", "the text 'off'", "YAML 1.1"),
        ("Yes", "the text 'Yes'", "YAML 1.1"),
        ("true", "the boolean true", ""),
        ("false", "the boolean false", ""),
        ("null", "nothing (null)", ""),
        ("~", "nothing (null)", ""),
        ("abc", "the text 'abc'", ""),
        ('""', "the text ''", ""),
        ("1:20", "1:20", "base 60"),
        ("'1:20'", "1:20", "base 60"),
        ("0x10", "0x10", "hexadecimal and octal"),
        ("0o10", "0o10", "hexadecimal and octal"),
        ("'0x10'", "0x10", "hexadecimal and octal"),
        (".inf", ".inf", "finite"),
        ("-.inf", "-.inf", "finite"),
        (".nan", ".nan", "finite"),
        ("'inf'", "inf", "finite"),
        ('"1/0"', "the text '1/0'", "divide by zero"),
        ("1e30", "1e30", "exponents are limited"),
        ("[1]", "a list", ""),
        ("{a: 1}", "a mapping", ""),
        ("1_000", "the text '1_000'", ""),
        ('"1.5/2"', "the text '1.5/2'", ""),
    ],
)
def test_bad_matrix_entry(entry, found, hint):
    p = only(with_x00(entry))
    assert where(p) == ("f.yaml", 3, 6, "x[0][0]")
    assert NUMBER in p.message
    assert found in p.message
    assert hint in p.hint


@pytest.mark.parametrize("entry", ["\u00b2", "\u0663", "\uff11"])  # superscript 2, Arabic-Indic 3, fullwidth 1
def test_non_ascii_digits_are_not_numbers(entry):
    p = only(with_x00(entry))
    assert where(p) == ("f.yaml", 3, 6, "x[0][0]")
    assert NUMBER in p.message


def test_bad_entry_in_a_weight_and_a_bias():
    text = BASE.replace("  - w_q: [[1, 0], [1, 0]", "  - w_q: [[1, 0], [yes, 0]") + "    b_q: [1, null]\n"
    found = problems(text)
    assert [where(p) for p in found] == [
        ("f.yaml", 5, 20, "heads[0].w_q[1][0]"),
        ("f.yaml", 8, 14, "heads[0].b_q[1]"),
    ]
    assert "the text 'yes'" in found[0].message and "nothing (null)" in found[1].message


def test_boolean_matrix_entries_must_be_true_or_false():
    text = BASE + "mask: [[yes, true, true], [true, true, true], [true, 1, true]]\n"
    found = problems(text)
    assert [where(p) for p in found] == [("f.yaml", 8, 9, "mask[0][0]"), ("f.yaml", 8, 54, "mask[2][1]")]
    assert all("expected true or false" in p.message for p in found)
    assert "YAML 1.1" in found[0].hint


def test_key_padding_entries_must_be_booleans():
    p = only(BASE + "key_padding: [true, off, true]\n")
    assert where(p) == ("f.yaml", 8, 21, "key_padding[1]")
    assert "expected true or false, found the text 'off'" in p.message


# --- shapes -----------------------------------------------------------------


def test_ragged_rows_in_x():
    p = only(BASE.replace("[0, 2, 0, 2]", "[0, 2, 0]"))
    assert where(p) == ("f.yaml", 3, 19, "x[1]")
    assert p.message == "row 2 has 3 entries but row 1 has 4"


def test_ragged_rows_in_a_weight():
    p = only(BASE.replace("    w_v: [[1, 0], [1, 0]", "    w_v: [[1, 0], [1]"))
    assert where(p) == ("f.yaml", 7, 19, "heads[0].w_v[1]")
    assert "row 2 has 1 entry but row 1 has 2" in p.message  # one entry, not "1 entries" (issue 8, G.25)


def test_shapes_that_do_not_chain():
    p = only(BASE.replace("  - w_q: [[1, 0], [1, 0], [0, 1], [0, 1]]", "  - w_q: [[1, 0], [1, 0], [0, 1]]"))
    assert where(p) == ("f.yaml", 5, 10, "heads[0].w_q")
    assert p.message == "w_q has 3 rows but x has 4 columns (d_model)"


def test_w_k_columns_must_match_w_q():
    p = only(BASE.replace("    w_k: [[1, 0], [1, 0], [0, 1], [0, 1]]", "    w_k: [[1, 0, 1], [1, 0, 1], [0, 1, 1], [0, 1, 1]]"))
    assert where(p) == ("f.yaml", 6, 10, "heads[0].w_k")
    assert "w_k has 3 columns" in p.message
    assert "d_k (columns of w_q) is 2" in p.message


def test_w_k_column_mismatch_message_reads_well():
    p = only(BASE.replace("    w_k: [[1, 0], [1, 0], [0, 1], [0, 1]]", "    w_k: [[1, 0, 1], [1, 0, 1], [0, 1, 1], [0, 1, 1]]"))
    assert "columns entries" not in p.message


FUSED = HEAD + "num_heads: 2\n"  # line 4; fused weights from line 5


def test_fused_columns_not_divisible_by_num_heads():
    text = FUSED + (
        "w_q: [[1, 0, 0], [0, 1, 0], [1, 0, 0], [0, 1, 0]]\n"
        "w_k: [[1, 0, 0], [0, 1, 0], [1, 0, 0], [0, 1, 0]]\n"
        "w_v: [[1, 0], [0, 1], [1, 0], [0, 1]]\n"
    )
    p = only(text)
    assert where(p) == ("f.yaml", 5, 6, "w_q")
    assert p.message == "w_q has 3 columns, which num_heads = 2 does not divide"


def test_fused_w_k_columns_must_match_w_q():
    text = FUSED + (
        "w_q: [[1, 0, 0, 1], [0, 1, 1, 0], [1, 0, 0, 1], [0, 1, 1, 0]]\n"
        "w_k: [[1, 0], [0, 1], [1, 0], [0, 1]]\n"
        "w_v: [[1, 0], [0, 1], [1, 0], [0, 1]]\n"
    )
    p = only(text)
    assert where(p) == ("f.yaml", 6, 6, "w_k")
    assert p.message == "w_k has 2 columns but num_heads·d_k (columns of w_q) is 4"


def test_fused_form_missing_weights():
    text = FUSED + "w_q: [[1, 0, 0, 1], [0, 1, 1, 0], [1, 0, 0, 1], [0, 1, 1, 0]]\n"
    found = problems(text)
    assert [(where(p), p.message) for p in found] == [
        (("f.yaml", 1, 1, ""), "the fused form needs w_k"),
        (("f.yaml", 1, 1, ""), "the fused form needs w_v"),
    ]


def test_fused_weights_without_num_heads():
    p = only(HEAD + "w_q: [[1, 0], [0, 1], [1, 0], [0, 1]]\n")
    assert where(p) == ("f.yaml", 4, 6, "w_q")
    assert "needs the fused form" in p.message


def test_both_forms():
    p = only(BASE + "num_heads: 1\nw_q: [[1], [1], [1], [1]]\n")
    assert where(p) == ("f.yaml", 5, 3, "heads")
    assert "not both" in p.message


def test_num_heads_disagreeing_with_heads():
    p = only(BASE + "num_heads: 2\n")
    assert where(p) == ("f.yaml", 5, 3, "heads")
    assert "not both" in p.message


def test_neither_form():
    p = only(HEAD)
    assert where(p) == ("f.yaml", 1, 1, "")
    assert str(p.message).startswith("no weights")


def test_heads_with_different_d_k():
    text = BASE + (
        "  - w_q: [[1], [1], [0], [0]]\n"
        "    w_k: [[1], [1], [0], [0]]\n"
        "    w_v: [[1, 0], [1, 0], [0, 1], [0, 1]]\n"
    )
    p = only(text)
    assert where(p) == ("f.yaml", 8, 5, "heads[1]")
    assert p.message == "d_k is 1 in this head but 2 in head 1; every head must have the same d_k"


def test_heads_with_different_d_v():
    text = BASE + (
        "  - w_q: [[1, 0], [1, 0], [0, 1], [0, 1]]\n"
        "    w_k: [[1, 0], [1, 0], [0, 1], [0, 1]]\n"
        "    w_v: [[1], [1], [0], [0]]\n"
    )
    p = only(text)
    assert where(p) == ("f.yaml", 8, 5, "heads[1]")
    assert "d_v is 1 in this head but 2 in head 1" in p.message


def test_w_o_rows_must_be_num_heads_times_d_v():
    p = only(BASE + "w_o: [[1, 0], [0, 1], [1, 1]]\n")
    assert where(p) == ("f.yaml", 8, 6, "w_o")
    assert p.message == "w_o has 3 rows but the heads concatenate to 2 columns (num_heads·d_v)"


def test_b_o_without_w_o():
    p = only(BASE + "b_o: [1, 2]\n")
    assert where(p) == ("f.yaml", 8, 6, "b_o")
    assert "there is no w_o" in p.message


def test_b_o_length():
    found = problems(BASE + "w_o: [[1, 0], [0, 1]]\nb_o: [1, 2, 3]\n")
    assert len(found) == 1
    assert where(found[0]) == ("f.yaml", 9, 6, "b_o")
    assert "b_o has 3 entries but d_out (columns of w_o) is 2" in found[0].message


def test_bias_length_in_a_head():
    p = only(BASE + "    b_q: [1, 2, 3]\n")
    assert where(p) == ("f.yaml", 8, 10, "heads[0].b_q")
    assert p.message == "b_q has 3 entries but d_k (columns of w_q and w_k) is 2"


@pytest.mark.parametrize(
    ("mask", "found"),
    [
        ("[[true, false], [true, true]]", "[2 × 2]"),
        ("[[true, false], [true, true], [true, true]]", "[3 × 2]"),
        ("[[true, true, true]]", "[1 × 3]"),
    ],
)
def test_mask_shape(mask, found):
    p = only(BASE + f"mask: {mask}\n")
    assert where(p) == ("f.yaml", 8, 7, "mask")
    assert p.message == f"mask is {found} but must be [L × L_k] = [3 × 3]"


def test_empty_mask_matrix_is_a_problem_not_a_crash():
    p = only(BASE + "mask: []\n")
    assert where(p)[:3] == ("f.yaml", 8, 7) and p.field == "mask"


def test_unknown_mask_name():
    p = only(BASE + "mask: lower\n")
    assert where(p) == ("f.yaml", 8, 7, "mask")
    assert "none, causal, causal_upper_left, causal_lower_right, {sliding_window: W, sinks: S}, or a matrix of true/false" in p.message and "'lower'" in p.message


def test_key_padding_length():
    p = only(BASE + "key_padding: [true, false]\n")
    assert where(p) == ("f.yaml", 8, 14, "key_padding")
    assert p.message == "key_padding has 2 entries but L_k (rows of x) is 3"


def test_tokens_length():
    p = only(BASE + "tokens: [a, b]\n")
    assert where(p) == ("f.yaml", 8, 9, "tokens")
    assert p.message == "tokens has 2 entries but L (rows of x) is 3"


def test_kv_tokens_without_x_kv():
    p = only(BASE + "kv_tokens: [a, b, c]\n")
    assert where(p) == ("f.yaml", 8, 12, "kv_tokens")
    assert "there is no x_kv" in p.message


def test_cross_attention_shapes_chain_through_x_kv():
    text = BASE.replace("    w_k: [[1, 0], [1, 0], [0, 1], [0, 1]]", "    w_k: [[1, 0], [1, 0], [0, 1]]") + \
        "x_kv: [[1, 0, 0], [0, 1, 0]]\n"  # d_kv = 3 (x_kv and w_k agree), but w_v has 4 rows
    p = only(text)
    assert where(p) == ("f.yaml", 7, 10, "heads[0].w_v")
    assert p.message == "w_v has 4 rows but x_kv has 3 columns (d_kv)"


def test_x_kv_outvoted_by_w_k_and_w_v():
    p = only(BASE + "x_kv: [[1, 0, 0], [0, 1, 0]]\n")  # 3 columns; w_k and w_v have 4 rows
    assert where(p) == ("f.yaml", 8, 7, "x_kv")
    assert p.message == "x_kv has 3 columns but d_kv (rows of w_k and w_v) is 4"


CROSS = BASE.replace("    w_k: [[1, 0], [1, 0], [0, 1], [0, 1]]", "    w_k: [[1, 0], [0, 1]]").replace(
    "    w_v: [[1, 0], [1, 0], [0, 1], [0, 1]]", "    w_v: [[1, 0], [0, 1]]") + "x_kv: [[1, 0], [0, 1]]\n"  # L_k = 2, line 8


@pytest.mark.parametrize(("extra", "field", "message"), [
    ("kv_tokens: [a, b, c]\n", "kv_tokens", "kv_tokens has 3 entries but L_k (rows of x_kv) is 2"),
    ("key_padding: [true, true, false]\n", "key_padding", "key_padding has 3 entries but L_k (rows of x_kv) is 2"),
    ("mask: [[true, true, true], [true, true, true], [true, true, true]]\n", "mask",
     "mask is [3 × 3] but must be [L × L_k] = [3 × 2]"),
])
def test_cross_attention_kv_tokens_and_padding_count_keys(extra, field, message):
    p = only(CROSS + extra)
    assert (where(p), p.message) == (("f.yaml", 9, len(field) + 3, field), message)


def test_the_keys_counted_by_three_fields_outvote_x_kv():
    """kv_tokens, key_padding and the mask all have 3 keys: x_kv's 2 rows are the one mistake, reported once."""
    p = only(CROSS + "kv_tokens: [a, b, c]\nkey_padding: [true, true, false]\n"
                     "mask: [[true, true, true], [true, true, true], [true, true, true]]\n")
    assert where(p) == ("f.yaml", 8, 7, "x_kv")
    assert p.message == "x_kv has 2 rows but L_k (entries of kv_tokens and key_padding, columns of mask) is 3"


# --- limits -----------------------------------------------------------------


def limited(text: str) -> list[Problem]:
    start = time.perf_counter()
    found = problems(text)
    assert time.perf_counter() - start < 3.0
    return found


def per_head(L: int, d: int, heads: int, d_k: int = 1) -> str:
    block = f"  - w_q: {mat(d, d_k)}\n    w_k: {mat(d, d_k)}\n    w_v: {mat(d, d_k)}\n"
    return f"id: t\ntitle: T\nx: {mat(L, d)}\nheads:\n" + block * heads


def test_limit_L_17():
    found = limited(per_head(17, 2, 1))
    assert [(where(p), p.message) for p in found] == [(("f.yaml", 3, 4, "x"), "L is 17, above the limit of 16")]


def test_limit_d_model_33():
    found = limited(per_head(2, 33, 1))
    assert [(where(p), p.message) for p in found] == [(("f.yaml", 3, 4, "x"), "d_model is 33, above the limit of 32")]


def test_limit_9_heads_per_head_form():
    found = limited(per_head(2, 2, 9))
    assert [(where(p), p.message) for p in found] == [(("f.yaml", 5, 3, "heads"), "heads is 9, above the limit of 8")]


def test_limit_9_heads_fused_form():
    text = f"id: t\ntitle: T\nx: {mat(2, 2)}\nnum_heads: 9\nw_q: {mat(2, 9)}\nw_k: {mat(2, 9)}\nw_v: {mat(2, 9)}\n"
    found = limited(text)
    assert [(where(p), p.message) for p in found] == [(("f.yaml", 4, 12, "num_heads"), "heads is 9, above the limit of 8")]


def test_limit_huge_num_heads_is_an_error_not_a_hang():
    text = f"id: t\ntitle: T\nx: {mat(2, 2)}\nnum_heads: 1000000000\nw_q: {mat(2, 2)}\nw_k: {mat(2, 2)}\nw_v: {mat(2, 2)}\n"
    found = limited(text)
    assert any(p.field == "num_heads" and "above the limit of 8" in p.message for p in found)


def test_limit_L_k_17():
    found = limited(per_head(2, 2, 1) + f"x_kv: {mat(17, 2)}\n")
    assert [(where(p), p.message) for p in found] == [(("f.yaml", 8, 7, "x_kv"), "L_k is 17, above the limit of 16")]


def test_limit_d_k_and_d_v_33():
    found = limited(per_head(2, 2, 1, d_k=33))
    messages = {(p.field, p.message) for p in found}
    assert ("heads[0].w_q", "d_k is 33, above the limit of 32") in messages
    assert ("heads[0].w_v", "d_v is 33, above the limit of 32") in messages


def test_limit_d_out_33():
    found = limited(per_head(2, 2, 1, d_k=2) + f"w_o: {mat(2, 33)}\n")
    assert [(where(p), p.message) for p in found] == [(("f.yaml", 8, 6, "w_o"), "d_out is 33, above the limit of 32")]


def test_the_limits_themselves_load():
    ex = parse_exercise(per_head(16, 32, 8, d_k=4), "f.yaml")
    assert (ex.L, ex.d_model, ex.num_heads, ex.heads[0].d_k, ex.d_out) == (16, 32, 8, 4, 32)


# --- fields -----------------------------------------------------------------


def test_unknown_fields_with_did_you_mean():
    found = problems(BASE + "titel: x\nwq: 1\nzzzzzz: 1\n")
    assert [where(p) for p in found] == [
        ("f.yaml", 8, 1, "titel"),
        ("f.yaml", 9, 1, "wq"),
        ("f.yaml", 10, 1, "zzzzzz"),
    ]
    assert all(p.message == "unknown field" for p in found)
    assert found[0].hint == "did you mean 'title'?"
    assert found[1].hint == "did you mean 'w_q'?"
    assert "did you mean" not in found[2].hint


def test_unknown_field_in_a_head():
    p = only(BASE + "    w_kk: [[1]]\n")
    assert where(p) == ("f.yaml", 8, 5, "heads[0].w_kk")
    assert p.message == "unknown field" and p.hint == "did you mean 'w_k'?"


def test_missing_required_fields():
    found = problems("x: [[1]]\n")
    assert [(where(p), p.message) for p in found][:2] == [
        (("f.yaml", 1, 1, "id"), "required field is missing"),
        (("f.yaml", 1, 1, "title"), "required field is missing"),
    ]
    assert len(found) == 3 and str(found[2].message).startswith("no weights: give 'heads'")  # all at once


def test_missing_x():
    found = problems("id: t\ntitle: T\n" + ONE_HEAD)
    assert [(where(p), p.message) for p in found] == [(("f.yaml", 1, 1, "x"), "required field is missing")]


def test_missing_fields_of_a_head():
    found = problems(HEAD + "heads:\n  - w_q: [[1], [1], [1], [1]]\n")
    assert [(where(p), p.message) for p in found] == [
        (("f.yaml", 5, 5, "heads[0].w_k"), "required field is missing"),
        (("f.yaml", 5, 5, "heads[0].w_v"), "required field is missing"),
    ]


@pytest.mark.parametrize("field", ["x", "x_kv", "w_o"])
def test_a_matrix_must_be_a_list_of_rows(field):
    text = BASE + f"{field}: 3\n" if field != "x" else BASE.replace("x: [[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]]", "x: 3")
    p = only(text)
    assert p.field == field
    assert "expected a matrix (a list of rows), found the number 3" in p.message


def test_bad_id_and_difficulty():
    found = problems(BASE.replace("id: t", "id: Bad Id") + "difficulty: 9\n")
    assert [where(p) for p in found] == [("f.yaml", 1, 5, "id"), ("f.yaml", 8, 13, "difficulty")]
    assert "lowercase letters" in found[0].message and "from 1 to 5" in found[1].message


@pytest.mark.parametrize(
    ("text", "found"),
    [("- 1\n- 2\n", "a list"), ("hello\n", "the text 'hello'"), ("42\n", "the number 42")],
)
def test_top_level_not_a_mapping(text, found):
    p = only(text)
    assert where(p) == ("f.yaml", 1, 1, "")
    assert p.message == f"expected a mapping of fields at the top level, found {found}"


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "---\n"])
def test_empty_file(text):
    p = only(text)
    assert where(p) == ("f.yaml", 1, 1, "")
    assert p.message == "the file is empty"


def test_not_utf8_file(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"id: t\ntitle: caf\xe9\n")
    with pytest.raises(ExerciseError) as info:
        load_exercise(str(path))
    (p,) = info.value.problems
    assert (p.file, p.line, p.field) == (str(path), 2, "")
    assert "not UTF-8" in p.message


def test_utf8_bom_is_accepted(tmp_path):
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + BASE.encode())
    assert load_exercise(str(path)).id == "t"


@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_unreadable_path(tmp_path, kind):
    path = tmp_path / "nope.yaml"
    if kind == "directory":
        path.mkdir()
    with pytest.raises(ExerciseError) as info:
        load_exercise(str(path))
    (p,) = info.value.problems
    assert (p.file, p.line, p.column, p.field) == (str(path), None, None, "")
    assert str(p.message).startswith("cannot read the file")
    assert str(p).startswith(f"{path}: cannot read the file")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs file permissions")
def test_unreadable_file_permissions(tmp_path):
    path = tmp_path / "locked.yaml"
    path.write_text(BASE)
    path.chmod(0)
    try:
        with pytest.raises(ExerciseError) as info:
            load_exercise(str(path))
    finally:
        path.chmod(0o600)
    assert "cannot read the file" in info.value.problems[0].message


def test_load_exercise_display_name(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text(BASE.replace("id: t", "id: T!"))
    with pytest.raises(ExerciseError) as info:
        load_exercise(str(path), display="shown.yaml")
    assert where(info.value.problems[0]) == ("shown.yaml", 1, 5, "id")
    assert str(info.value.problems[0]).startswith("shown.yaml:1:5: id: ")


# --- several problems at once -----------------------------------------------


def test_several_schema_problems_reported_at_once():
    text = (
        "id: Bad Id\n"  # 1
        "title: T\n"  # 2
        "x: [[1, yes], [0, 2]]\n"  # 3
        "heads:\n"  # 4
        "  - w_q: [[1], [1]]\n"  # 5
        "    w_k: [[1], null]\n"  # 6
        "    w_v: [[1], [1]]\n"  # 7
        "difficulty: 9\n"  # 8
        "foo: 1\n"  # 9
    )
    found = problems(text)
    assert [where(p) for p in found] == [
        ("f.yaml", 1, 5, "id"),
        ("f.yaml", 3, 9, "x[0][1]"),
        ("f.yaml", 6, 16, "heads[0].w_k[1]"),
        ("f.yaml", 8, 13, "difficulty"),
        ("f.yaml", 9, 1, "foo"),
    ]


def test_several_shape_problems_reported_at_once():
    text = BASE + (
        "tokens: [a, b]\n"  # 8
        "mask: [[true]]\n"  # 9
        "key_padding: [true, true, true, true]\n"  # 10: each disagrees with x (3 rows) in its own way
        "w_o: [[1], [1], [1]]\n"  # 11
    )
    found = problems(text)
    assert sorted(where(p) for p in found) == [
        ("f.yaml", 8, 9, "tokens"),
        ("f.yaml", 9, 7, "mask"),
        ("f.yaml", 10, 14, "key_padding"),
        ("f.yaml", 11, 6, "w_o"),
    ]


def test_several_yaml_problems_reported_at_once():
    text = BASE + "id: again\n<<: {a: 1}\ndescription: !!binary aGVsbG8=\n"
    found = problems(text)
    assert [where(p) for p in found] == [
        ("f.yaml", 8, 1, "id"),
        ("f.yaml", 9, 1, "<<"),
        ("f.yaml", 10, 14, "description"),
    ]


def test_problem_str_is_file_line_col_field_message():
    p = only(with_x00("yes"))
    assert str(p) == (
        "f.yaml:3:6: x[0][0]: expected a number (integer, decimal, or a fraction such as \"1/3\"), "
        "found the text 'yes' (yes is text in YAML 1.2, not a boolean as in YAML 1.1; write a number)"
    )


# --- robustness -------------------------------------------------------------


def test_deep_nesting_is_a_problem_not_a_crash():
    found = problems("id: t\ntitle: T\nx: " + "[" * 800 + "]" * 800 + "\n")
    deep = [p for p in found if "nested more than" in p.message]
    assert len(deep) == 1 and (deep[0].file, deep[0].line) == ("f.yaml", 3)


def test_very_deep_nesting_is_refused_by_the_parser():
    p = only("id: t\ntitle: T\nx: " + "[" * 5000 + "]" * 5000 + "\n")
    assert (p.file, p.line) == ("f.yaml", 3)
    assert "not valid YAML" in p.message


def test_empty_list_message_reads_well():
    p = only(BASE + "x_kv: []\n")
    assert where(p) == ("f.yaml", 8, 7, "x_kv")
    assert not re.search(r"at least one an? ", p.message)


def test_empty_list_is_a_problem():
    p = only(BASE + "x_kv: []\n")
    assert where(p) == ("f.yaml", 8, 7, "x_kv")
    assert "found an empty list" in p.message


NUMBER = 'a number (integer, decimal, or a fraction such as "1/3")'


@pytest.mark.parametrize(("text", "field", "item"), [
    (BASE.replace("[1, 1, 1, 1]]", "[]]"), "x[2]", NUMBER),  # a row's entries are numbers, not rows
    (BASE + "w_o: [[]]\n", "w_o[0]", NUMBER),
    (BASE + "w_o: []\n", "w_o", "a row (a list of numbers)"),
    (BASE + "    b_q: []\n", "heads[0].b_q", NUMBER),  # a bias's entries are numbers, not lists
    (HEAD + "num_heads: 1\nw_q: [[1], [1], [1], [1]]\nw_k: [[1], [1], [1], [1]]\nw_v: [[1], [1], [1], [1]]\nb_v: []\n",
     "b_v", NUMBER),
    (HEAD + "heads: []\n", "heads", "a mapping of fields"),
])
def test_an_empty_list_says_what_each_entry_is(text, field, item):
    """Found by tests/test_fuzz.py: the hint said "each entry is a row" for a row, and "a list" for a bias."""
    (p,) = [p for p in problems(text) if p.field == field]
    assert p.message == "expected at least one entry, found an empty list"
    assert p.hint == f"each entry is {item}"
