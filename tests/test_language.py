"""Choosing the language (issue 22, item 1) and what each language shows (items 2 and 3).

``--lang zh|en`` after any command's name (or before it), then
``ATTN_TUTOR_LANG``, then the locale (``LC_ALL``, ``LC_MESSAGES``, ``LANG``);
an unknown language is one usage line, exit 2.  A Chinese user reads the
help, the exercises and the concept bank in Chinese; an English one sees no
Chinese at all.
"""

from __future__ import annotations

import json
import re

import pytest
import yaml

from tutor.base.catalogs.zh import ZH
from tutor.base.messages import EN

from .conftest import EXERCISES

HAN = re.compile(r"[\u4e00-\u9fff]")
BUNDLED = sorted(p.stem for p in EXERCISES.glob("*.yaml"))
UNKNOWN = "unknown language '{value}' ({where}); attn-tutor speaks: en, zh"


def chinese(text: str) -> bool:
    return HAN.search(text) is not None


# --- choosing --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [
    ("explain", "single-head-3x4", "--lang", "zh"),
    ("explain", "--lang", "zh", "single-head-3x4"),
    ("explain", "single-head-3x4", "--lang=zh"),
    ("--lang", "zh", "explain", "single-head-3x4"),
    ("explain", "single-head-3x4", "--lang", "zh_CN.UTF-8"),
])
def test_lang_zh_anywhere_before_the_end_of_options_speaks_chinese(cli, argv):
    code, out, err = cli(*argv)
    assert (code, err) == (0, "")
    assert ZH["step.scores.title"].split("（")[0] in out and EN["step.scores.title"] not in out


def test_the_last_lang_given_wins_and_lang_en_overrides_the_environment(cli):
    code, out, _ = cli("explain", "single-head-3x4", "--lang", "zh", "--lang", "en", env={"ATTN_TUTOR_LANG": "zh"})
    assert code == 0 and not chinese(out.replace(_title_zh("single-head-3x4"), ""))


def _title_zh(exercise: str) -> str:
    return yaml.safe_load((EXERCISES / f"{exercise}.yaml").read_text(encoding="utf-8"))["translations"]["zh"]["title"]


@pytest.mark.parametrize(("variables", "is_chinese"), [
    ({"ATTN_TUTOR_LANG": "zh"}, True),
    ({"LANG": "zh_CN.UTF-8"}, True),
    ({"LC_MESSAGES": "zh_TW.UTF-8", "LANG": "en_US.UTF-8"}, True),
    ({"LC_ALL": "C", "LANG": "zh_CN.UTF-8"}, False),
    ({"LANG": "de_DE.UTF-8"}, False),
    ({"ATTN_TUTOR_LANG": "en", "LANG": "zh_CN.UTF-8"}, False),
])
def test_attn_tutor_lang_then_the_locale_choose_when_lang_is_not_given(cli, variables, is_chinese):
    code, out, _ = cli("list", env=variables)
    assert code == 0 and chinese(out) == is_chinese


@pytest.mark.parametrize(("argv", "value"), [(("list", "--lang", "fr"), "fr"), (("list", "--lang=klingon"), "klingon")])
def test_an_unknown_language_is_one_usage_line_naming_the_ones_there_are(cli, argv, value):
    code, out, err = cli(*argv)
    assert (code, out) == (2, "")
    assert err.splitlines() == ["error: " + UNKNOWN.format(value=value, where="--lang"), "try 'attn-tutor list --help'"]


def test_an_unknown_attn_tutor_lang_is_the_same_usage_error_from_a_real_process(cli_process):
    r = cli_process("list", env={"ATTN_TUTOR_LANG": "fr"})
    assert (r.code, r.stdout) == (2, b"")
    assert r.stderr.decode().splitlines() == ["error: " + UNKNOWN.format(value="fr", where="ATTN_TUTOR_LANG"),
                                              "try 'attn-tutor list --help'"]


@pytest.mark.parametrize("argv", [("list", "--lang"), ("list", "--lang=")])
def test_lang_without_a_language_is_a_usage_error(cli, argv):
    code, out, err = cli(*argv)
    assert (code, out) == (2, "") and err.splitlines()[0] == "error: --lang needs a language: en, zh"


def test_a_long_unknown_language_is_cut_in_the_error(cli):
    err = cli("list", "--lang", "z" * 100_000).err
    assert len(err) < 300 and "z" * 40 + "…" in err


def test_a_good_lang_makes_a_bad_attn_tutor_lang_irrelevant(cli_process):
    r = cli_process("list", "--lang", "zh", env={"ATTN_TUTOR_LANG": "fr"})
    assert r.code == 0 and chinese(r.stdout.decode())


def test_with_format_json_an_unknown_language_is_also_a_json_document(cli):
    code, out, err = cli("explain", "single-head-3x4", "--format", "json", "--lang", "xx")
    assert code == 2 and err.startswith("error: unknown language 'xx'")
    doc = json.loads(out)
    assert (doc["error"], doc["exit_code"]) == ("usage", 2) and "'xx'" in doc["errors"][0]["message"]


def test_the_language_is_the_runs_only(cli):
    assert chinese(cli("list", "--lang", "zh").out)
    assert not chinese(cli("list").out)


# --- help -------------------------------------------------------------------------------------------------


def _commands() -> list[tuple[str, ...]]:
    from tutor.cli import COMMANDS

    out: list[tuple[str, ...]] = [()]
    for name, function, _ in COMMANDS:
        subs = [info.name for info in getattr(function, "registered_commands", [])]
        out += [(name, sub) for sub in subs] if subs else [(name,)]
    return out


@pytest.mark.parametrize("command", _commands(), ids=lambda c: " ".join(c) or "attn-tutor")
def test_every_command_lists_lang_and_its_help_is_in_chinese(cli, command):
    code, out, err = cli(*command, "--help", "--lang", "zh", env={"COLUMNS": "120"})
    assert (code, err) == (0, "")
    assert "--lang" in out and "用法：" in out and "选项" in out
    for english in ("Usage:", "Options", "Show this message and exit", "[default:", "[required]"):
        assert english not in out
    # every sentence of the help is Chinese: no run of three English words outside code spans and names
    prose = re.findall(r"(?<![\w`'./-])[a-z]{2,} [a-z]{2,} [a-z]{2,}(?![\w`'./-])", re.sub(r"`[^`]*`", "", out))
    assert prose == []
    code, out, _ = cli(*command, "--help", env={"COLUMNS": "120"})
    assert code == 0 and "--lang" in out and not chinese(out)


# --- content ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("exercise", BUNDLED)
def test_every_bundled_exercise_has_its_title_and_description_in_chinese(exercise):
    doc = yaml.safe_load((EXERCISES / f"{exercise}.yaml").read_text(encoding="utf-8"))
    zh = doc["translations"]["zh"]
    assert chinese(zh["title"]) and (chinese(zh["description"]) if doc.get("description") else True)


def test_every_concept_question_has_its_words_in_chinese():
    from tutor.drills.bank import load

    bank = load()
    missing = [c.id for c in bank.concepts if "zh" not in c.q.translations]
    assert missing == [] and len(bank.concepts) >= 30
    for c in bank.concepts:
        words = c.q.in_language("zh")
        assert all(chinese(text) for text in (words.question, words.model_answer, words.short_answer,
                                              *words.key_points, *(w.why for w in words.wrong_answers)))
        assert (words.follow_ups, words.claims, words.id) == (c.q.follow_ups, c.q.claims, c.q.id)


def test_explain_shows_the_chinese_title_and_description(cli):
    doc = yaml.safe_load((EXERCISES / "padding-4x2.yaml").read_text(encoding="utf-8"))
    code, out, _ = cli("explain", "padding-4x2", "--lang", "zh", env={"COLUMNS": "200"})
    assert code == 0 and doc["translations"]["zh"]["title"] in out and doc["title"] not in out
    code, out, _ = cli("explain", "padding-4x2", "--format", "json", "--lang", "zh")
    assert json.loads(out)["exercise"]["title"] == doc["translations"]["zh"]["title"]


def test_drill_concepts_asks_in_chinese(cli):
    from tutor.drills.bank import load

    code, out, _ = cli("drill", "concepts", "--lang", "zh", "--show-answers", "--format", "json", "--count", "3")
    assert code == 0
    asked = json.loads(out)["questions"]
    bank = load()
    for q in asked:
        assert q["question"] == bank.get(q["id"]).q.translations["zh"].question


def test_an_english_user_sees_no_chinese(cli):
    outs = [cli("explain", e).out for e in BUNDLED[:5]]
    outs += [cli("list").out, cli("drill", "concepts", "--list").out, cli("--help").out, cli("schema").out,
             cli("drill", "concepts", "--show-answers", "--count", "40", "--format", "json").out]
    assert [o[:80] for o in outs if chinese(o)] == []


def _bad(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_translation_into_a_language_there_is_not_is_refused_where_it_is_written(cli, tmp_path):
    src = (EXERCISES / "single-head-3x4.yaml").read_text(encoding="utf-8").replace("translations:\n  zh:", "translations:\n  fr:")
    path = _bad(tmp_path, "fr.yaml", src)
    code, out, err = cli("validate", path)
    assert code == 2 and "no language 'fr' to translate into" in out + err and "translations.fr" in out + err


def test_a_bank_translation_with_another_count_of_key_points_is_refused(cli, tmp_path):
    folder = tmp_path / "bank"
    folder.mkdir()
    (folder / "b.yaml").write_text("""topic: t
questions:
  - id: q-one
    question: Why?
    key_points: [one, two, three]
    model_answer: Because.
    short_answer: Because.
    wrong_answers: [{answer: a, why: b}, {answer: c, why: d}]
    translations:
      zh:
        question: 为什么？
        key_points: [一, 二]
        model_answer: 因为。
        short_answer: 因为。
        wrong_answers: [{answer: 甲, why: 乙}, {answer: 丙, why: 丁}]
""", encoding="utf-8")
    code, out, err = cli("validate", folder)
    assert code == 2 and "key_points: 2 here, 3 in English" in out + err


# --- usage errors -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("argv", "key", "fields"), [
    (("explain", "--foo"), "cli.usage.no_such_option.suggest", {"option": "--foo", "options": "--force, --format"}),
    (("explain",), "cli.usage.missing_argument", {"name": "exercise"}),
    (("explain", "single-head-3x4", "--precision", "abc"), "cli.usage.invalid_value",
     {"param": "--precision", "reason": ZH["cli.usage.reason.integer"]}),
    (("explain", "single-head-3x4", "--precision", "99"), "cli.usage.invalid_value",
     {"param": "--precision", "reason": ZH["cli.usage.reason.at_most"].format(n=15)}),
    (("explain", "single-head-3x4", "--head", "0"), "cli.usage.invalid_value",
     {"param": "--head", "reason": ZH["cli.usage.reason.at_least"].format(n=1)}),
    (("explain", "single-head-3x4", "--format", "xml"), "cli.usage.invalid_value",
     {"param": "--format", "reason": ZH["cli.usage.reason.choice"].format(
         value="xml", choices="'rich', 'json', 'markdown', 'html'")}),
    (("explain", "a", "b"), "cli.usage.extra", {"args": "b"}),
    (("explain", "single-head-3x4", "--precision"), "cli.usage.needs_value", {"option": "--precision"}),
    (("drill", "bogus"), "cli.usage.no_such_command", {"name": "bogus"}),
])
def test_a_usage_error_is_said_in_chinese(cli, argv, key, fields):
    code, out, err = cli(*argv, "--lang", "zh")
    assert (code, out) == (2, "")
    first, second = err.splitlines()
    assert first == ZH["cli.error"].format(message=ZH[key].format(**fields))
    assert second.startswith(ZH["cli.usage.try"].split("'")[0])


def test_in_english_a_usage_error_is_clicks_own_sentence(cli):
    assert cli("explain", "single-head-3x4", "--precision", "99").err.splitlines()[0] == (
        "error: invalid value for '--precision': Input should be less than or equal to 15")


@pytest.mark.parametrize("argv", [("schema",), ("explain", "--help"), ("code", "check", "--help"), ("--help",)])
def test_a_chinese_run_leaves_nothing_chinese_for_the_next_english_one(cli, argv):
    """Text fixed when a module is imported (the schema's descriptions, the help) is English, whichever
    language the run that imported it spoke; each run translates it when it shows it."""
    def shown(out: str) -> str:  # JSON is written in ASCII (\u escapes): read it back
        return json.dumps(json.loads(out), ensure_ascii=False) if out.startswith("{") else out

    assert chinese(shown(cli(*argv, "--lang", "zh").out))
    assert not chinese(shown(cli(*argv).out))


@pytest.mark.parametrize("columns", ["80", "100", "120"])
@pytest.mark.parametrize("command", [("new",), ("practice",), ("code", "check"), ("drill", "shapes")], ids=" ".join)
def test_chinese_help_wraps_its_lines_and_cuts_none(cli, command, columns):
    """rich measured a wrapped line's last space in characters, not cells: a line of Chinese kept it and a
    table cut the line's last character with "…" instead (the trial's first finding)."""
    code, out, _ = cli(*command, "--help", "--lang", "zh", env={"COLUMNS": columns})
    assert code == 0 and "…" not in out


def test_an_unknown_lang_is_said_in_the_language_the_locale_asks_for(cli_process):
    r = cli_process("list", "--lang", "zz", env={"LANG": "zh_CN.UTF-8"})
    assert (r.code, r.stdout) == (2, b"")
    assert r.stderr.decode().splitlines()[0] == ZH["cli.error"].format(message=ZH["cli.lang.unknown"].format(
        value="zz", where="--lang", languages="en, zh"))


def test_a_multiple_choice_concept_drill_says_so(cli):
    out = cli("drill", "concepts", "--mode", "choice", "--count", "1", "--seed", "1", "--lang", "zh").out
    assert ZH["drill.intro.concepts.choice"].split("{")[0] in out and "先用自己的话回答" not in out
    out = cli("drill", "concepts", "--mode", "choice", "--count", "1", "--seed", "1").out
    assert "pick the right answer" in out and "answer in your own words" not in out


# --- from the trial that tried to break it -----------------------------------------------------------------


def test_an_unknown_field_in_a_bank_translation_is_one_problem_not_an_internal_error(cli, tmp_path):
    folder = tmp_path / "bank"
    folder.mkdir()
    (folder / "b.yaml").write_text("""translations: {zh: {titel: 文件}}
topic: t
questions:
  - id: q-one
    question: Why?
    key_points: [one, two]
    model_answer: Because.
    short_answer: Because.
    wrong_answers: [{answer: a, why: b}, {answer: c, why: d}]
    translations:
      zh: {question: 为什么？, questoin: x, key_points: [一, 二], model_answer: 因为。, short_answer: 因为。,
           wrong_answers: [{answer: 甲, why: 乙}, {answer: 丙, why: 丁}]}
""", encoding="utf-8")
    code, out, err = cli("validate", folder)
    said = out + err
    assert code == 2 and "internal error" not in said
    assert "translations.zh.titel: unknown field (did you mean 'title'?)" in said
    assert "translations.zh.questoin: unknown field (did you mean 'question'?)" in said


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_chinese_on_a_stream_that_cannot_show_it_is_english_with_a_warning(cli_process, encoding):
    r = cli_process("list", "--lang", "zh", env={"PYTHONIOENCODING": encoding})
    assert r.code == 0 and b"\\u" not in r.stdout and b"Bundled exercises" in r.stdout
    assert r.stderr.decode("ascii").startswith("warning: this output's encoding")


def test_a_gb18030_stream_shows_chinese_as_it_is(cli_process):
    r = cli_process("list", "--lang", "zh", env={"PYTHONIOENCODING": "gb18030"})
    out = r.stdout.decode("gb18030")
    assert r.code == 0 and chinese(out) and "\\u" not in out and r.stderr == b""


def test_commands_and_yes_no_typed_full_width_are_read(cli):
    out = cli("practice", "single-head-3x4", "--lang", "zh", input="ｈｉｎｔ\nｑｕｉｔ\n").out
    assert "提示：Q = X·W_Q" in out and "未知名称" not in out  # the hint shown, not an answer refused
    from tutor.drills.driver import NO, YES
    from tutor.practice.events import Command, read_event

    assert read_event("ｓｈｏｗ") == Command("show") and {"是", "对"} <= set(YES) and {"否", "不"} <= set(NO)


def test_a_blank_chinese_title_falls_back_to_the_english_one(cli, tmp_path):
    text = (EXERCISES / "single-head-3x4.yaml").read_text(encoding="utf-8")
    path = tmp_path / "blank-title.yaml"
    path.write_text(text.replace(_title_zh("single-head-3x4"), "   "), encoding="utf-8")
    out = cli("explain", path, "--lang", "zh", env={"COLUMNS": "200"}).out
    assert "Three tokens, d_model = 4, one head with d_k = 2" in out


@pytest.mark.parametrize(("value", "found"), [("\n  - zh", "a list"), ("{zh: 只是字符串}", "the text '只是字符串'")])
def test_a_translations_field_that_is_no_mapping_says_what_it_should_be(cli, tmp_path, value, found):
    path = tmp_path / "t.yaml"
    path.write_text(f"id: x1\ntitle: T\ntranslations: {value}\nx: [[1]]\nheads:\n  - {{w_q: [[1]], w_k: [[1]], w_v: [[1]]}}\n",
                    encoding="utf-8")
    code, out, err = cli("validate", path)
    assert code == 2
    assert f"expected {EN['expected.translations']}, found {found}" in out + err


def test_a_found_value_names_look_alike_characters_but_shows_chinese_as_written():
    from tutor.exercise.yamlread import describe

    assert describe("只是字符串") == "the text '只是字符串'"
    assert "U+FF41" in describe("ａbc")  # a full-width letter looks like ASCII: named


@pytest.mark.parametrize("argv", [("new", "--seed", "3"), ("new", "--like", "two-head-causal-3x4", "--seed", "3")])
def test_a_new_file_written_in_chinese_keeps_english_fields_and_its_chinese_under_translations(cli, tmp_path, argv):
    path = tmp_path / "n.yaml"
    assert cli(*argv, "-o", path, "--lang", "zh").code == 0
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    english = yaml.safe_load(cli(*argv).out)
    assert (doc["title"], doc["description"]) == (english["title"], english["description"])
    assert not chinese(doc["title"]) and chinese(doc["translations"]["zh"]["title"])
    assert cli("validate", path).code == 0
    assert doc["translations"]["zh"]["title"] in cli("explain", path, "--lang", "zh", env={"COLUMNS": "200"}).out
    assert not chinese(cli("explain", path).out)
