"""Every language's catalogue is whole: English's keys, English's ``{fields}``, its own plural rules, its typography.

A key missing from a catalogue would fall back to English on a Chinese
screen, silently; a template with another field would raise or print a
field's name.  These tests fail instead.
"""

from __future__ import annotations

import re
import string

import pytest

from tutor.base.catalogs.zh import ZH
from tutor.base.messages import CATALOGS, EN, LANGUAGES, PLURAL_RULES, plural, plural_category, t, use_language

TRANSLATIONS = [lang for lang in LANGUAGES if lang != "en"]
CATEGORIES = ("zero", "one", "two", "few", "many", "other")


def fields(template: str) -> set[tuple[str, str, str]]:
    """The ``{fields}`` of a template: (name, format spec, conversion)."""
    return {(name, spec or "", conv or "") for _, name, spec, conv in string.Formatter().parse(template) if name is not None}


def plural_base(key: str) -> str | None:
    """``count.rows`` for ``count.rows.one``: the key without its plural category, when it has one."""
    head, _, last = key.rpartition(".")
    return head if last in CATEGORIES and f"{head}.other" in EN else None


def categories(lang: str) -> set[str]:
    """The plural categories ``lang`` uses for the counts 0 to 200."""
    return {plural_category(n, lang) for n in range(201)}


def required(lang: str) -> set[str]:
    """The keys a catalogue of ``lang`` must have: every English key, its plural forms only for the categories
    the language has (Chinese: ``other`` alone)."""
    out = set()
    for key in EN:
        base = plural_base(key)
        if base is None or key.rpartition(".")[2] in categories(lang):
            out.add(key)
    return out


@pytest.mark.parametrize("lang", TRANSLATIONS)
def test_a_catalogue_has_every_key_it_needs_and_no_other(lang):
    catalog = CATALOGS[lang]
    missing = sorted(required(lang) - set(catalog))
    extra = sorted(set(catalog) - set(EN))
    assert (missing, extra) == ([], [])


@pytest.mark.parametrize("lang", TRANSLATIONS)
def test_a_catalogue_has_no_plural_form_its_language_does_not_use(lang):
    unused = sorted(k for k in CATALOGS[lang] if plural_base(k) and k.rpartition(".")[2] not in categories(lang))
    assert unused == []


@pytest.mark.parametrize("lang", TRANSLATIONS)
def test_every_template_has_the_fields_of_its_english(lang):
    wrong = []
    for key, template in CATALOGS[lang].items():
        base = plural_base(key)
        english = (set().union(*(fields(EN[f"{base}.{c}"]) for c in CATEGORIES if f"{base}.{c}" in EN))
                   if base else fields(EN[key]))
        theirs = fields(template)
        # one form of a counted sentence may leave out a field another form uses (English's "one" says "a row")
        if (theirs - english) if base else (theirs != english):
            wrong.append((key, sorted(theirs), sorted(english)))
    assert wrong == []


def test_the_field_check_would_see_a_field_renamed_or_dropped():
    assert fields("第 {row} 行，{n:rows}") == {("row", "", ""), ("n", "rows", "")}
    assert fields(EN["yaml.duplicate_key"]) != fields("重复的键 '{key}'")


def test_english_says_one_and_other_and_chinese_other_alone():
    assert [plural_category(n, "en") for n in (0, 1, 2, 21)] == ["other", "one", "other", "other"]
    assert categories("zh") == {"other"}
    assert set(PLURAL_RULES) == set(LANGUAGES)


def test_a_count_in_chinese_takes_its_one_form_for_every_number():
    with use_language("zh"):
        assert plural("count.entries", 1) == ZH["count.entries.other"].format(count=1)
        said = t("bank.too_few", field="key_points", n=1)
        assert ZH["count.entries.other"].format(count=1) in said and "{" not in said
    with use_language("en"):
        assert plural("count.entries", 1) == "1 entry"


HAN = r"[\u4e00-\u9fff]"


def _prose(template: str) -> str:
    """A template without its fields and code spans (what the typography rules are about)."""
    return re.sub(r"`[^`]*`", "", re.sub(r"\{[^{}]*\}", "", template))


def test_chinese_puts_a_space_between_han_and_latin_letters_or_digits():
    tight = sorted(k for k, v in ZH.items() if re.search(rf"{HAN}[A-Za-z0-9]|[A-Za-z0-9]{HAN}", _prose(v)))
    assert tight == []


def test_chinese_prose_has_full_width_punctuation_beside_han():
    half = sorted(k for k, v in ZH.items() if re.search(rf"{HAN}[,;?!]|{HAN}:(?!//)|{HAN}\((?![\w.]*\))", _prose(v)))
    assert half == []


def test_every_language_has_its_name_and_english_is_the_reference():
    assert LANGUAGES["en"] == "English" and LANGUAGES["zh"] == "中文"
    assert CATALOGS["en"] is EN
