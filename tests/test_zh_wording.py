"""The Chinese a learner or an instructor reads: one term per concept (/work/shared/glossary-zh.md), no English
left inside a Chinese sentence, counts that agree with their words (trial findings F9, F16)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tutor.base.catalogs.zh import CATALOG as ZH

ROOT = Path(__file__).resolve().parent.parent
#: Every Chinese text the package ships: the catalogue, the kata starters and solutions, the concept bank,
#: the Chinese README.
ZH_FILES = [*sorted((ROOT / "tutor" / "katas" / "files").glob("*/*.zh.py")),
            *sorted((ROOT / "tutor" / "drills" / "concepts").glob("*.yaml")), ROOT / "README.zh-CN.md"]


def _chinese_texts() -> list[tuple[str, str]]:
    return [(f"zh.py:{k}", v) for k, v in ZH.items()] + [(p.name, p.read_text("utf-8")) for p in ZH_FILES]


@pytest.mark.parametrize(("avoid", "use"), [
    ("屏蔽", "掩码 (mask), 被掩码的 (masked), 遮蔽 (to mask)"),  # the glossary's 掩码; 屏蔽 is only "also seen"
    ("学生 id", "学号"),
    ("记忆率", "记忆保持率"),  # the same retention column in stats and report
])
def test_chinese_uses_one_term_per_concept(avoid, use):
    found = [where for where, text in _chinese_texts() if avoid in text]
    assert not found, f"{avoid!r} (use {use}) in {found}"
    if avoid == "记忆率":
        assert ZH["stats.col.retention"] == ZH["report.col.retention"]


# --- counts: Chinese has one form for every count (messages.PLURAL_RULES), so a sentence whose English has a
# "one" form must read right in Chinese for 1 as for 3: no plural demonstrative for what may be one thing.

PLURAL_ONLY = ("这些", "这几", "它们", "几个")


def _counted_keys() -> list[str]:
    from tutor.base.catalogs.en import EN

    return sorted(k for k in ZH if k.endswith(".other") and f"{k[:-6]}.one" in EN and not k.startswith("count."))


def test_a_chinese_sentence_said_for_one_thing_has_no_plural_demonstrative():
    wrong = {k: ZH[k] for k in _counted_keys() if any(w in ZH[k] for w in PLURAL_ONLY)}
    assert not wrong


def test_one_odd_entry_and_one_right_step_read_as_one_in_chinese():
    """F9's "除 1 个元素以外……这几个元素另有偏差" and F16's "给出的 1 个步骤都正确"."""
    from tutor.base.messages import Msg, use_language

    with use_language("zh"):
        near = str(Msg.plural("diagnose.near", 1, message="你忘了除以 √d_k。", details="scaled[t3, t1]"))
        right = str(Msg.plural("batch.comment.right", 1))
        right3 = str(Msg.plural("batch.comment.right", 3))
    assert near == "你忘了除以 √d_k。这能解释除 1 个元素以外的所有元素；另有偏差的是：scaled[t3, t1]。"
    assert right == "给出的步骤正确（共 1 个）。"
    assert right3 == "给出的步骤正确（共 3 个）。"


# --- foreign text: the system's, the YAML parser's and click's sentences are English whatever the language of
# the run; each kind attn-tutor knows is said in words of its own, any other quoted as a detail.

def _latin_words(text: str) -> list[str]:
    """Runs of two or more ASCII letters: English words (identifiers and paths are left out by the caller)."""
    import re

    return re.findall(r"[A-Za-z]{2,}", text)


@pytest.mark.parametrize("name", ["ENOENT", "EACCES", "ELOOP", "EISDIR", "ENOTDIR", "ENAMETOOLONG", "EROFS", "EIO"])
def test_a_system_error_is_said_in_chinese_and_in_the_systems_english(name):
    import errno
    import os

    from tutor.base.messages import use_language
    from tutor.base.outfile import os_reason, system_reason

    err = OSError(getattr(errno, name), os.strerror(getattr(errno, name)))
    with use_language("zh"):
        said = os_reason(err)
        assert system_reason(os.strerror(err.errno)) == said
    assert said == ZH[f"os.errno.{name}"] and not _latin_words(said)
    with use_language("en"):
        assert os_reason(err) == os.strerror(err.errno)  # English as the system says it (Linux, where tests run)


def test_an_unknown_system_error_is_quoted_as_a_detail():
    import errno

    from tutor.base.messages import use_language
    from tutor.base.outfile import os_reason

    with use_language("zh"):
        assert os_reason(OSError(errno.EXDEV, "Invalid cross-device link")) == "系统报告的错误：“Invalid cross-device link”"
        assert os_reason(ValueError("embedded null byte")) == "系统报告的错误：“embedded null byte”"
    with use_language("en"):
        assert os_reason(OSError(errno.EXDEV, "Invalid cross-device link")) == "Invalid cross-device link"


def test_a_loop_of_links_is_said_in_chinese(cli, tmp_path):
    """F9: "无法读取文件：Too many levels of symbolic links"."""
    (tmp_path / "a.yaml").symlink_to(tmp_path / "b.yaml")
    (tmp_path / "b.yaml").symlink_to(tmp_path / "a.yaml")
    r = cli("--lang", "zh", "validate", tmp_path / "a.yaml")
    assert r.code == 2
    assert f"{tmp_path / 'a.yaml'}: 无法读取文件：符号链接层数过多（链接可能构成了循环）" in r.out + r.err
    r = cli("--lang", "zh", "check", tmp_path / "a.yaml")
    assert r.code == 2 and "符号链接层数过多" in r.err and "symbolic" not in r.out + r.err


#: YAML a person writes by mistake, each a kind of parser problem (tutor.exercise.yamlread.PARSER_PROBLEMS).
BAD_YAML = {
    "flow_sequence": "x: [[1, 2]\n", "flow_mapping": "x: {a: 1\ny: 2\n", "mapping_values": "title: a: b\n",
    "key": "x:\n  - 1\n - 2\n", "token": "x: `y`\n", "end": 'x: "abc\n', "escape": 'x: "a\\qb"\n',
    "alias": "x: *nope\n", "anchor": "x: & \n", "documents": "x: 1\n---\ny: 2\n",
}


@pytest.mark.parametrize("loader", ["CSafeLoader", "SafeLoader"])  # libyaml's words and PyYAML's own
@pytest.mark.parametrize("kind", sorted(BAD_YAML))
def test_each_kind_of_yaml_problem_is_said_in_chinese_by_either_parser(kind, loader):
    import yaml

    from tutor.base.messages import use_language
    from tutor.exercise.yamlread import parser_problem

    if not hasattr(yaml, loader):
        pytest.skip("PyYAML without libyaml")
    with pytest.raises(yaml.YAMLError) as caught:
        yaml.compose(BAD_YAML[kind], Loader=getattr(yaml, loader))
    with use_language("zh"):
        said = parser_problem(caught.value.problem, caught.value.context)
    expected = {"key": ("key", "dash")}.get(kind, (kind,))  # a wrong indentation: libyaml says "key", PyYAML "dash"
    assert said in [ZH[f"yaml.problem.{k}"] for k in expected]
    assert not _latin_words(said)


def test_an_unknown_yaml_problem_is_quoted_as_the_parsers_detail():
    from tutor.base.messages import use_language
    from tutor.exercise.yamlread import parser_problem

    with use_language("zh"):
        assert parser_problem("did not find the expected '>'") == "解析器报告：“did not find the expected '>'”"
    with use_language("en"):
        assert parser_problem("did not find the expected '>'") == "did not find the expected '>'"


def test_an_unclosed_list_is_said_in_chinese(cli, tmp_path):
    """F9: "不是有效的 YAML：did not find expected ',' or ']'"."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("id: a\nx: [[1, 2]\n", encoding="utf-8")
    r = cli("--lang", "zh", "validate", bad)
    assert r.code == 2
    assert f"{bad}:3:1: 不是有效的 YAML：方括号里的列表没有正确结束：这里应为逗号或 ]" in r.out + r.err
    assert "did not find" not in r.out + r.err


def test_clicks_refusal_of_a_path_is_said_in_chinese(cli, tmp_path):
    """F9: "'--export' 的值无效：file '…/progress' is a directory" (stats --export DIR); its siblings."""
    (tmp_path / "a.yaml").write_text("id: a\n", encoding="utf-8")
    said = {
        ("stats", "--export", tmp_path): f"'--export' 的值无效：{tmp_path} 是文件夹，这里需要一个文件",
        ("list", "--exercises", tmp_path / "a.yaml"): f"'--exercises' 的值无效：{tmp_path / 'a.yaml'} 是文件，这里需要一个文件夹",
        ("list", "--exercises", tmp_path / "none"): f"'--exercises' 的值无效：{tmp_path / 'none'} 不存在",
    }
    for argv, sentence in said.items():
        r = cli("--lang", "zh", *argv)
        assert r.code == 2 and r.err.splitlines()[0] == f"错误：{sentence}", argv
    r = cli("stats", "--export", tmp_path)
    assert r.err.splitlines()[0] == f"error: invalid value for '--export': file '{tmp_path}' is a directory"


def test_a_file_click_could_not_open_is_said_with_the_systems_reason_in_chinese():
    import errno
    import os

    from tutor.base.messages import use_language
    from tutor.cli import usage_message

    with use_language("zh"):
        said = usage_message(f"invalid value for '--out': 'x.txt': {os.strerror(errno.EACCES)}")
    assert said == "'--out' 的值无效：x.txt：没有访问权限"


# --- lists: the tie sentence's names hold "，" (F9) and "和" between two Chinese words takes no space.

@pytest.mark.parametrize(("parts", "said"), [
    (["w_q", "w_k", "b_q"], "w_q、w_k 和 b_q"),  # Latin beside 和: a space, as the glossary's typography says
    (["除以了 2", "乘以了 2"], "除以了 2 和乘以了 2"),
    (["忘了缩放", "除以了错误的常数"], "忘了缩放和除以了错误的常数"),
    (["「甲」", "「乙」", "「丙」"], "「甲」、「乙」和「丙」"),
    (["王小明", "b_q"], "王小明和 b_q"),
])
def test_chinese_and_takes_a_space_only_beside_latin_letters_or_digits(parts, said):
    from tutor.base.messages import join_and, use_language

    with use_language("zh"):
        assert join_and(parts) == said
    with use_language("en"):
        assert join_and(["w_q", "w_k", "b_q"]) == "w_q, w_k and b_q"


def test_the_tie_sentence_quotes_each_name_in_chinese():
    """F9: "（并列：除以了 √d_model，而不是 √d_k、除以了 d_k，而不是 √d_k 和 除以了错误的常数）" -- where does a name end?"""
    from tutor.base.messages import use_language
    from tutor.render.report import _assign_sentence, mistake_name

    a = {"mistake": "scale_sqrt_d_model", "tied": ["scale_sqrt_d_model", "scale_d_k", "scale_constant"],
         "tiled": False, "step": None, "exercise": "single-head-asym-3x4"}
    with use_language("zh"):
        names = [mistake_name(k) for k in a["tied"]]
        said = _assign_sentence(a)
    assert "，" in names[0]  # what makes the quotes needed
    assert f"（并列：「{names[0]}」、「{names[1]}」和「{names[2]}」）：{names[0]}。" in said
    with use_language("en"):
        assert "(divided by √d_model instead of √d_k, divided by d_k instead of √d_k and divided by the wrong constant)" \
            in _assign_sentence(a)


def test_the_production_views_masked_line_reads_as_chinese():
    """F9: "allowed 为：掩码本身，[L, L_k]，对每个序列都相同：[1, 1, L, L_k]，在批量维和头维上广播" was the English
    word for word; the sentence says what allowed is, its shape in brackets, then how it broadcasts."""
    from tutor.base.messages import Msg, use_language

    with use_language("zh"):
        said = {k: str(Msg("trace.masked", allowed=Msg(f"trace.masked.{k}"))) for k in ("mask", "padding", "both")}
    assert said["mask"] == ("masked_fill(~allowed, -inf)，其中 allowed 即掩码本身（[L, L_k]），各序列共用，"
                            "以 [1, 1, L, L_k] 的形状在批量维和头维上广播")
    assert said["padding"] == ("masked_fill(~allowed, -inf)，其中 allowed 即键填充掩码本身（每个序列一份），"
                               "以 [B, 1, 1, L_k] 的形状在头维和查询维上广播")
    assert said["both"] == "masked_fill(~allowed, -inf)，其中 allowed 即掩码与键填充取 AND 的结果，以 [B, 1, L, L_k] 的形状在头维上广播"


def test_a_handout_title_says_whose_variant_it_is_without_two_brackets_in_a_row():
    """F9: "单个头（d_k = 2）（学生：用中文当学号）" and "(variant of 用中文当学号)": the variant is FOR a student."""
    from tutor.base.messages import t, use_language

    with use_language("zh"):
        assert t("handouts.title", title="单个头（d_k = 2）", student="王小明") == "单个头（d_k = 2）——学生：王小明"
    with use_language("en"):
        assert t("handouts.title", title="One head (d_k = 2)", student="Ana") == "One head (d_k = 2) — variant for Ana"


def test_an_sqlite_failure_is_said_in_chinese():
    import sqlite3

    from tutor.base.messages import use_language
    from tutor.store.errors import reason

    err = sqlite3.OperationalError("attempt to write a readonly database")
    err.sqlite_errorcode = 8  # type: ignore[attr-defined]  # SQLITE_READONLY, as sqlite3 sets it
    odd = sqlite3.OperationalError("no such savepoint: x")
    odd.sqlite_errorcode = 1  # type: ignore[attr-defined]
    with use_language("zh"):
        assert reason(err) == "数据库处于只读状态，无法写入"
        assert reason(odd) == "系统报告的错误：“no such savepoint: x”"
    with use_language("en"):
        assert reason(err) == "attempt to write a readonly database"
