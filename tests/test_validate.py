"""`attn-tutor validate`: every problem of every file, at its line, with a fix hint.

The broken files in ``tests/data/broken/`` are one per YAML trap or shape
mistake the issue names; each expected line below was read and checked by
hand against its file (line and column counted in the file, 1-based).
"""

from __future__ import annotations

import json
import random
import re
import shutil
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tutor.exercise import Validation, validate_file, validate_text

REPO = Path(__file__).resolve().parent.parent
EXERCISES = REPO / "exercises"
BUNDLED = sorted(EXERCISES.glob("*.yaml"))
BROKEN = REPO / "tests" / "data" / "broken"

NUMBER = 'expected a number (integer, decimal, or a fraction such as "1/3")'

# file -> (exit code, problem lines on stdout), in file order
EXPECTED: dict[str, tuple[int, list[str]]] = {
    "duplicate-key.yaml": (2, [
        "{f}:9:5: heads[0].w_q: duplicate key 'w_q' (first given at line 6) "
        "(keep one of them; YAML keeps only the last, silently)",
    ]),
    "tab.yaml": (2, [
        f"{{f}}:{n}:1: a tab character where YAML expects spaces (indent with spaces; YAML does not allow tabs there)"
        for n in (6, 7, 8)
    ]),
    "yaml11-booleans.yaml": (2, [
        f"{{f}}:4:9: x[0][1]: {NUMBER}, found the text 'yes' (yes is text in YAML 1.2, not a boolean as in YAML 1.1; write a number)",
        f"{{f}}:4:16: x[1][0]: {NUMBER}, found the text 'no' (no is text in YAML 1.2, not a boolean as in YAML 1.1; write a number)",
        f"{{f}}:6:12: heads[0].w_q[0][0]: {NUMBER}, found the text 'on' (on is text in YAML 1.2, not a boolean as in YAML 1.1; write a number)",
        f"{{f}}:7:17: heads[0].w_k[1][0]: {NUMBER}, found the text 'off' (off is text in YAML 1.2, not a boolean as in YAML 1.1; write a number)",
    ]),
    "yaml11-mask.yaml": (2, [
        "{f}:5:7: mask: expected none, causal, causal_upper_left, causal_lower_right, {{sliding_window: W, sinks: S}}, or a matrix of true/false, found the text 'yes' "
        "(yes is text in YAML 1.2, not a boolean as in YAML 1.1; write causal for a causal mask, none for no mask)",
    ]),
    "exponent.yaml": (0, [
        "{f}:4:6: warning: x[0][0]: 1e3 has an exponent: read as 1000 (YAML 1.2), "
        "but YAML 1.1 tools such as PyYAML read it as text (write 1000)",
    ]),
    "leading-zero.yaml": (0, [
        "{f}:4:6: warning: x[0][0]: 010 has a leading zero: read as 10 (YAML 1.2), "
        "but YAML 1.1 tools such as PyYAML read it as octal (write 10)",
    ]),
    "base60-radix.yaml": (2, [
        f"{{f}}:4:6: x[0][0]: {NUMBER}, found the text '1:20' (YAML 1.1 read 1:20 as a number in base 60; write the number itself)",
        f"{{f}}:4:12: x[0][1]: {NUMBER}, found the number 0o10 (hexadecimal and octal numbers are not allowed in a matrix)",
        f"{{f}}:4:20: x[1][0]: {NUMBER}, found the number 0x10 (hexadecimal and octal numbers are not allowed in a matrix)",
    ]),
    "alias-bomb.yaml": (2, [
        "{f}:8:1: e: aliases expand to more than 100000 values (aliases are for reusing a value (w_k: *w_q); "
        "this file would expand past the size limits, so it was refused before being read in full)",
    ]),
    "aliases.yaml": (0, []),
    "ragged.yaml": (2, [
        "{f}:5:5: x[1]: row 2 has 3 entries but row 1 has 4 (give every row of the matrix the same number of entries)",
    ]),
    "shapes-do-not-chain.yaml": (2, [
        # w_q's rows are wrong, so its columns say nothing about d_k: w_k (3 columns) is not blamed for them
        "{f}:6:10: heads[0].w_q: w_q is [3 × 2] but must be [d_model × d_k] = [4 × 3] "
        "(d_model: columns of x, rows of w_k and w_v; d_k: columns of w_k) (give w_q 4 rows of 3 entries)",
    ]),
    "mask-and-padding.yaml": (2, [
        "{f}:9:7: mask: mask is [2 × 2] but must be [L × L_k] = [3 × 3] "
        "(one row per query and one column per key: 3 rows of 3 entries, true where the query may attend the key)",
        "{f}:10:14: key_padding: key_padding has 4 entries but L_k (rows of x) is 3 (give key_padding 3 entries)",
    ]),
    "limits.yaml": (2, [
        "{f}:4:4: x: L is 17, above the limit of 16 "
        "(the limits keep an exercise small enough for paper and for the exact engine; make L at most 16)",
    ]),
    "unknown-fields.yaml": (2, [
        "{f}:5:1: tokns: unknown field (did you mean 'tokens'?)",
        "{f}:8:5: heads[0].wk: unknown field (did you mean 'w_k'?)",
    ]),
    "merge-and-tag.yaml": (2, [
        "{f}:4:9: x[0][1]: expected a plain value, found the YAML tag !!float "
        "(remove the tag; values are read by the rules of the format)",
        "{f}:5:1: base: unknown field (see `attn-tutor schema` for the fields)",
        "{f}:7:5: heads[0]: merge keys (<<) are not supported (reuse a whole value with an alias instead, e.g. w_k: *w_q)",
    ]),
    "syntax.yaml": (2, [
        "{f}:5:1: not valid YAML: did not find expected ',' or ']' "
        "(check the brackets, quotes and indentation here and on the line before)",
    ]),
    "no-weights.yaml": (2, [
        "{f}:2:1: no weights: give 'heads' (per-head form) or 'num_heads' with w_q, w_k, w_v (fused form) "
        "(`attn-tutor new` writes a complete example to start from)",
    ]),
    "many-mistakes.yaml": (2, [
        "{f}:2:5: id: expected an id of lowercase letters, digits and '-', starting with a letter or digit, "
        "found the text 'Many_Mistakes'",
        "{f}:6:10: heads[0].w_q: w_q has 3 rows but x has 4 columns (d_model) (w_q needs one row per column of x: 4 rows)",
        f"{{f}}:7:20: heads[0].w_k[1][0]: {NUMBER}, found the text 'yes' (yes is text in YAML 1.2, not a boolean as in YAML 1.1; write a number)",
        "{f}:9:7: mask: mask is [2 × 2] but must be [L × L_k] = [3 × 3] "
        "(one row per query and one column per key: 3 rows of 3 entries, true where the query may attend the key)",
        "{f}:10:14: key_padding: key_padding has 4 entries but L_k (rows of x) is 3 (give key_padding 3 entries)",
        "{f}:11:1: tokns: unknown field (did you mean 'tokens'?)",
        "{f}:12:13: difficulty: expected a whole number from 1 to 5, found the number 7",
    ]),
    "solution-file.yaml": (2, [
        "{f}:1:1: exercise: this is a solution file (it starts with 'exercise:'), not an exercise "
        "(check it with `attn-tutor check {f}`)",
    ]),
}


def test_every_broken_fixture_has_an_expectation():
    assert sorted(p.name for p in BROKEN.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_broken_file_exact_output(name, cli):
    code, lines = EXPECTED[name]
    f = str(BROKEN / name)
    got_code, out, err = cli("validate", "--no-notes", f)
    assert out.splitlines() == [line.format(f=f) for line in lines]
    assert got_code == code
    assert "Traceback" not in err


def test_every_problem_has_a_fix_hint_except_plain_type_errors():
    """Every trap and shape problem says how to fix it (type errors name what was expected instead)."""
    for name in EXPECTED:
        v = validate_file(str(BROKEN / name))
        for p in v.problems:
            if "expected an id" in p.message or "expected a whole number" in p.message:
                continue
            assert p.hint, str(p)


def test_bundled_exercises_all_validate(cli):
    code, out, err = cli("validate", "--no-notes", str(EXERCISES))
    assert (code, out) == (0, "")
    assert err == f"files checked: {len(BUNDLED)}; valid: {len(BUNDLED)}; invalid: 0; problems: 0\n"
    # with the notes (the default): only notes, one per mistake an exercise cannot catch; the exit code is the same
    code, out, err = cli("validate", str(EXERCISES))
    assert code == 0 and err == f"files checked: {len(BUNDLED)}; valid: {len(BUNDLED)}; invalid: 0; problems: 0\n"
    assert out and all(": note: cannot catch " in line for line in out.splitlines())


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_each_bundled_exercise_is_valid_without_warnings(path):
    v = validate_file(str(path))
    assert v.ok and v.problems == () and v.warnings == ()


def test_summary_counts_files_and_problems(cli):
    code, out, err = cli("validate", "--no-notes", str(BROKEN / "ragged.yaml"), str(BROKEN / "aliases.yaml"),
                         str(BROKEN / "unknown-fields.yaml"))
    assert code == 2
    assert len(out.splitlines()) == 3
    assert err == "files checked: 3; valid: 1; invalid: 2; problems: 3\n"


def test_a_folder_is_searched_recursively_skipping_hidden_folders_and_solution_files(tmp_path, cli):
    (tmp_path / "pack" / "deep").mkdir(parents=True)
    (tmp_path / "pack" / ".github").mkdir()
    shutil.copy(EXERCISES / "single-head-3x4.yaml", tmp_path / "pack" / "deep" / "a.yml")
    (tmp_path / "pack" / ".github" / "ci.yml").write_text("on: push\n")  # not an exercise, and hidden
    (tmp_path / "pack" / "sol.yaml").write_text("exercise: single-head-3x4\nq: [[1, 1], [2, 2], [2, 2]]\n")
    (tmp_path / "pack" / "notes.txt").write_text("not yaml")
    # the copy of a bundled exercise clashes with it: rename it first
    text = (tmp_path / "pack" / "deep" / "a.yml").read_text().replace("id: single-head-3x4", "id: a")
    (tmp_path / "pack" / "deep" / "a.yml").write_text(text)
    code, out, err = cli("validate", "--no-notes", str(tmp_path / "pack"))
    assert (code, out) == (0, "")
    assert err.startswith("files checked: 1; valid: 1;")


def test_missing_path_and_empty_folder(tmp_path, cli):
    (tmp_path / "empty").mkdir()
    code, out, _ = cli("validate", str(tmp_path / "nope.yaml"), str(tmp_path / "empty"))
    assert code == 2
    assert out.splitlines() == [
        f"{tmp_path / 'nope.yaml'}: no such file or folder",
        f"{tmp_path / 'empty'}: no *.yaml or *.yml files in this folder (hidden folders (such as .github) are skipped)",
    ]


def test_ids_defined_twice_are_reported_with_both_files(tmp_path, cli):
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    text = (EXERCISES / "single-head-3x4.yaml").read_text().replace("id: single-head-3x4", "id: twin")
    a.write_text(text)
    b.write_text(text)
    code, out, _ = cli("validate", "--no-notes", str(a), str(b))
    assert code == 2
    assert out == (f"{b}: id: exercise id 'twin' is defined twice: {a} and {b} "
                   "(give one of them another id; an id must be unique across the bundled exercises and every pack)\n")


def test_an_id_that_clashes_with_a_bundled_exercise_is_reported(tmp_path, cli):
    shutil.copy(EXERCISES / "single-head-3x4.yaml", tmp_path / "copy.yaml")
    code, out, _ = cli("validate", str(tmp_path / "copy.yaml"))
    assert code == 2
    assert out.startswith(f"{tmp_path / 'copy.yaml'}: id: exercise id 'single-head-3x4' is defined twice: "
                          "bundled:single-head-3x4.yaml and ")


def test_json_format_for_ci(cli):
    code, out, _ = cli("validate", "--format", "json", str(BROKEN / "ragged.yaml"), str(BROKEN / "exponent.yaml"))
    assert code == 2
    report = json.loads(out)
    assert report["valid"] is False
    # exponent.yaml has Q = K and d_k = 1: K·Qᵀ and a forgotten scaling give its right values
    assert report["summary"] == {"files": 2, "valid": 1, "invalid": 1, "problems": 1, "warnings": 1, "notes": 2}
    ragged, exponent = report["files"]
    assert ragged["valid"] is False and ragged["id"] is None
    assert ragged["problems"] == [{
        "file": str(BROKEN / "ragged.yaml"), "line": 5, "column": 5, "field": "x[1]",
        "message": "row 2 has 3 entries but row 1 has 4",
        "hint": "give every row of the matrix the same number of entries", "severity": "error",
        "text": f"{BROKEN / 'ragged.yaml'}:5:5: x[1]: row 2 has 3 entries but row 1 has 4 "
                "(give every row of the matrix the same number of entries)",
    }]
    assert exponent["valid"] is True and exponent["id"] == "exponent" and exponent["problems"] == []
    assert [w["severity"] for w in exponent["warnings"]] == ["warning"]
    assert [(n["key"], n["severity"]) for n in exponent["notes"]] == [("kq_transposed", "note"), ("no_scaling", "note")]
    assert ragged["notes"] == []


def test_json_of_valid_files_exits_0(cli):
    code, out, _ = cli("validate", "--format", "json", str(EXERCISES))
    assert code == 0 and json.loads(out)["valid"] is True


def test_alias_bomb_is_refused_at_once():
    start = time.perf_counter()
    v = validate_file(str(BROKEN / "alias-bomb.yaml"))
    assert time.perf_counter() - start < 0.5
    assert len(v.problems) == 1 and "aliases expand" in v.problems[0].message


def test_a_bigger_alias_bomb_is_refused_just_as_fast():
    levels = "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]\n" for i in range(1, 30))
    text = "id: bomb\ntitle: T\nl0: &l0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n" + levels  # 10^30 values
    start = time.perf_counter()
    v = validate_text(text, "f.yaml")
    assert time.perf_counter() - start < 0.5
    assert [(p.line, p.field) for p in v.problems] == [(7, "l4")]  # l4 alone expands to 111111 values


def test_valid_file_with_problems_none_and_exercise_set():
    v = validate_file(str(EXERCISES / "two-head-causal-3x4.yaml"))
    assert isinstance(v, Validation) and v.ok and v.exercise is not None and v.exercise.id == "two-head-causal-3x4"


def test_shapes_are_checked_even_when_another_field_is_invalid():
    """Schema and shape problems are reported together, each once."""
    text = (EXERCISES / "single-head-3x4.yaml").read_text()
    text = text.replace("title: ", "titel: ", 1).replace("  - w_q: [[1, 0], [1, 0], [0, 1], [0, 1]]",
                                                        "  - w_q: [[1, 0], [1, 0], [0, 1]]")
    v = validate_text(text, "f.yaml")
    assert [(p.line, p.field, p.message) for p in v.problems] == [
        (2, "title", "required field is missing"),
        (3, "titel", "unknown field"),
        (20, "heads[0].w_q", "w_q has 3 rows but x has 4 columns (d_model)"),  # after the Chinese title and description
    ]


# --- mutated files never give a traceback -----------------------------------------

_SNIPPETS = ["\t", ":", "- ", "[", "]", "{", "}", ",", "&a ", "*a", "!!str ", "<<: ", "\n", "  ", "yes", "010", "1e3",
             "1:20", "0x10", "'", '"', "#", "|", ">", "~", "null", "-1", "1/0", "Ⅻ", "٣", "\x00", "? ", "%YAML 1.1\n"]


@st.composite
def mutated(draw) -> str:
    text = BUNDLED[draw(st.integers(0, len(BUNDLED) - 1))].read_text()
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["insert", "delete", "replace", "dup_line", "swap_lines"]))
        pos = draw(st.integers(0, len(text)))
        if kind == "insert":
            text = text[:pos] + draw(st.sampled_from(_SNIPPETS) | st.text(max_size=5)) + text[pos:]
        elif kind == "delete":
            text = text[:pos] + text[pos + draw(st.integers(1, 20)):]
        elif kind == "replace" and pos < len(text):
            text = text[:pos] + draw(st.sampled_from(_SNIPPETS)) + text[pos + 1:]
        else:
            lines = text.splitlines(keepends=True)
            i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            if kind == "dup_line":
                lines.insert(i, lines[j])
            else:
                lines[i], lines[j] = lines[j], lines[i]
            text = "".join(lines)
    return text


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_bundled_files_give_problems_or_pass_never_a_traceback(text):
    v = validate_text(text, "m.yaml")
    assert isinstance(v, Validation)
    assert (v.exercise is not None) == (v.problems == ())
    lines = text.count("\n") + 2
    for p in v.problems + v.warnings:
        assert p.file == "m.yaml"
        assert p.message
        assert p.line is None or 1 <= p.line <= lines
        str(p)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=mutated())
def test_mutated_files_through_the_cli_exit_0_or_2(text, tmp_path_factory, cli):
    path = tmp_path_factory.mktemp("m") / "m.yaml"
    path.write_bytes(text.encode("utf-8", errors="replace"))
    code, out, err = cli("validate", "--format", "json", path)
    assert code in (0, 2) and "Traceback" not in err


def test_random_byte_flips_never_crash():
    rng = random.Random(5)
    for path in BUNDLED:
        data = bytearray(path.read_bytes())
        for _ in range(40):
            mutated_bytes = bytearray(data)
            for _ in range(3):
                mutated_bytes[rng.randrange(len(mutated_bytes))] = rng.randrange(256)
            try:
                text = bytes(mutated_bytes).decode("utf-8")
            except UnicodeDecodeError:
                continue
            assert isinstance(validate_text(text, "b.yaml"), Validation)


# --- the documentation -----------------------------------------------------------------


DOCS = REPO / "docs"


def test_exercise_examples_in_the_format_doc_are_valid():
    blocks = re.findall(r"```yaml\n(.*?)```", (DOCS / "exercise-format.md").read_text(encoding="utf-8"), flags=re.S)
    examples = [b for b in blocks if b.startswith("id: ")]
    assert len(examples) == 8  # v1: 3; v2: one per feature (MQA, GQA, a decode step, causal + padding, ALiBi)
    for block in examples:
        v = validate_text(block, "exercise-format.md")
        assert v.ok and v.warnings == (), [str(p) for p in v.problems]


def test_schema_command_prints_the_loaders_schema(cli):
    from tutor.exercise import ExerciseFile, json_schema

    code, out, _ = cli("schema")
    schema = json.loads(out)
    assert code == 0 and schema == json_schema()
    assert set(schema["properties"]) == set(ExerciseFile.model_fields)
    assert schema["additionalProperties"] is False and schema["required"] == ["id", "title", "x"]
    assert schema["$defs"]["HeadBlock"]["additionalProperties"] is False


def test_every_new_command_is_documented_and_has_help(cli):
    guide = (DOCS / "authoring.md").read_text(encoding="utf-8")
    for command in ("validate", "new", "schema"):
        assert f"attn-tutor {command}" in guide
        code, out, _ = cli(command, "--help")
        assert code == 0 and "Usage" in out
    for option in ("--exercises", "--blank", "--export", "--format markdown", "--format html", "ATTN_TUTOR_PATH",
                   "yaml-language-server", "yaml.schemas"):
        assert option in guide
