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
