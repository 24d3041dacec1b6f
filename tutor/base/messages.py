"""Every user-facing sentence, by key, in the language of the run.

Code asks for text by key: ``t("schema.required")``; templates use
``str.format`` fields.  Each language is one module of
:mod:`tutor.base.catalogs` (``en``, ``zh``) holding every key; the languages
attn-tutor speaks are :data:`LANGUAGES`, and a catalogue is imported the first
time its language is spoken (:data:`CATALOGS`).  ``tests/test_catalogs.py``
holds every catalogue to English's keys and ``{fields}``; a key a catalogue
lacks would fall back to English.  Notation (``Q K^T``, shapes, numbers) is
not wording and is not translated.  Counts agree with words by each
language's plural rules (:func:`plural_category`): English has ``one`` and
``other``, Chinese ``other`` alone.

The language in use is a context variable, never the process's environment:
:func:`use_language` sets it for a block (:func:`tutor.cli.main` speaks the
language of its :class:`tutor.base.env.Env` for the whole run) and :func:`t`
reads it; outside such a block it is English.  A context variable follows
the code that runs in the block, and only it: a test that sets a language
cannot leak it into the next, and a thread started inside the block speaks
English unless it runs in a copy of the context
(:func:`contextvars.copy_context`).  Text computed at import time (the help
of the command line's options) is English; the help is translated when it is
shown (:func:`tutor.cli.common.translated_help`).
"""

from __future__ import annotations

import importlib
import string
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from numbers import Integral

from .catalogs.en import EN

#: The languages attn-tutor speaks: code and name (in that language).  Each is a module of
#: :mod:`tutor.base.catalogs` defining ``CATALOG``, every key of :data:`EN`.
LANGUAGES: dict[str, str] = {"en": "English", "zh": "中文"}


class _Catalogs(dict[str, dict[str, str]]):
    """Language -> catalogue; a language of :data:`LANGUAGES` is imported the first time it is asked for.

    Tests register catalogues of their own (a pseudo-locale) as in any dict."""

    def __missing__(self, lang: str) -> dict[str, str]:
        if lang not in LANGUAGES:
            raise KeyError(lang)
        catalog: dict[str, str] = importlib.import_module(f"{__package__}.catalogs.{lang}").CATALOG
        self[lang] = catalog
        return catalog

    def __contains__(self, lang: object) -> bool:
        return lang in LANGUAGES or dict.__contains__(self, lang)


#: Every catalogue, by language code (``CATALOGS["zh"]`` imports the Chinese one).
CATALOGS: dict[str, dict[str, str]] = _Catalogs(en=EN)


_LANGUAGE: ContextVar[str] = ContextVar("attn_tutor_language", default="en")


def language() -> str:
    """The catalogue in use: the language :func:`use_language` set for the code running now, else ``en``."""
    return _LANGUAGE.get()


@contextmanager
def use_language(lang: str) -> Iterator[None]:
    """Speak ``lang`` (a key of :data:`CATALOGS`) inside the block; the language before it afterwards.

    Raises ``ValueError`` for a language that has no catalogue.

    >>> with use_language("en"):
    ...     language()
    'en'
    """
    if lang not in CATALOGS:
        raise ValueError(f"no message catalogue for language {lang!r} (known: {', '.join(LANGUAGES)})")
    token = _LANGUAGE.set(lang)
    try:
        yield
    finally:
        _LANGUAGE.reset(token)


def t(key: str, /, **fields: object) -> str:
    """The sentence for ``key`` in the current language, with ``fields`` filled in.

    A field whose format spec names a counted noun, ``{found:rows}``, is
    written with that noun in the form its number takes: ``1 row``,
    ``2 rows`` (the catalogue's ``count.rows.one`` / ``count.rows.other``,
    through :func:`plural`).  Raises ``KeyError`` for an unknown key (a
    programming error, caught by tests).
    """
    template = CATALOGS[language()].get(key) or EN[key]
    return _FORMATTER.format(template, **fields) if fields else template


# --- counts in sentences ------------------------------------------------------------
# One mechanism for every number that a word agrees with.  A sentence that
# changes with a count has a form per plural category (``key.one``,
# ``key.other``), chosen by :func:`plural`; a counted noun inside a sentence
# is a format spec, ``{found:rows}``, rendered as ``count.rows.<category>``.
# English has the categories ``one`` (exactly 1) and ``other``; a translation
# with more (``few``, ``many``) adds them to :func:`plural_category` and its
# catalogue, and falls back to ``other`` for a form it lacks.


#: Each language's plural rule (CLDR's cardinal categories): a count -> its category.  A language
#: not listed (a test's pseudo-locale, derived from English) follows English.
PLURAL_RULES: dict[str, Callable[[int], str]] = {
    "en": lambda n: "one" if n == 1 else "other",
    "zh": lambda n: "other",  # Chinese has no plural forms: one template for every count
}


def plural_category(count: int, lang: str | None = None) -> str:
    """The plural category of ``count`` in ``lang`` (default: the language in use), by :data:`PLURAL_RULES`:
    ``one`` or ``other`` in English, always ``other`` in Chinese."""
    return PLURAL_RULES.get(lang or language(), PLURAL_RULES["en"])(count)


def plural(key: str, count: int, /, **fields: object) -> str:
    """The form of ``key`` for ``count``: ``key.one`` (``1 entry``) or ``key.other`` (``2 entries``).

    ``count`` fills the ``{count}`` field; ``fields`` the others.  A form
    missing from the language in use falls back to its ``other`` form, then
    to English.  Raises ``KeyError`` when ``key`` has no ``other`` form.

    >>> plural("count.entries", 1), plural("count.entries", 2), plural("count.entries", 0)
    ('1 entry', '2 entries', '0 entries')
    """
    return _FORMATTER.format(_form(key, plural_category(count)), count=count, **fields)



def join_and(parts: Sequence[str]) -> str:
    """``parts`` as a list in a sentence: ``a``, ``a and b``, ``a, b and c`` (``list.sep``, ``list.and``).

    >>> join_and(["w_q"]), join_and(["w_q", "w_k", "b_q"])
    ('w_q', 'w_q, w_k and b_q')
    """
    if len(parts) == 1:
        return parts[0]
    return t("list.and", rest=t("list.sep").join(parts[:-1]), last=parts[-1])


def join_sentences(sentences: Sequence[str]) -> str:
    """Whole sentences as one paragraph, each after the one before by ``sentence.pair``: a space in English
    (``Right. Exactly 12.``), nothing after a Chinese full stop.  ``""`` for none.

    >>> join_sentences(["It is [2, 3].", "Axis 0 is B = 2."])
    'It is [2, 3]. Axis 0 is B = 2.'
    """
    if not sentences:
        return ""
    text = sentences[0]
    for sentence in sentences[1:]:
        text = t("sentence.pair", first=text, second=sentence)
    return text


def _form(key: str, category: str) -> str:
    """The template of ``key`` for a plural category, falling back to ``other``, then to English."""
    catalog = CATALOGS[language()]
    form = f"{key}.{category}"
    return catalog.get(form) or catalog.get(f"{key}.other") or EN.get(form) or EN[f"{key}.other"]


class _CatalogFormatter(string.Formatter):
    """``str.format`` plus counted nouns: ``{n:rows}`` is :func:`plural` of ``count.rows``
    (a count given as text, ``over 1000000``, takes the ``other`` form)."""

    def format_field(self, value: object, format_spec: str) -> str:
        if format_spec and f"count.{format_spec}.other" in EN:
            if isinstance(value, Integral) and not isinstance(value, bool):
                return plural(f"count.{format_spec}", int(value))
            return _FORMATTER.format(_form(f"count.{format_spec}", "other"), count=value)  # text: "over 1000000"
        return super().format_field(value, format_spec)


_FORMATTER = _CatalogFormatter()




