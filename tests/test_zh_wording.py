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
