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



def join_and(parts: Sequence[Text]) -> str:
    """``parts`` as a list in a sentence: ``a``, ``a and b``, ``a, b and c`` (``list.sep``, ``list.and``).

    >>> join_and(["w_q"]), join_and(["w_q", "w_k", "b_q"])
    ('w_q', 'w_q, w_k and b_q')
    """
    words = [str(p) for p in parts]
    if len(words) == 1:
        return words[0]
    rest, last = t("list.sep").join(words[:-1]), words[-1]
    before, _, tail = t("list.and", rest="\0", last="\1").partition("\0")
    between, _, after = tail.partition("\1")
    return f"{before}{rest}{_spaced(rest[-1:], between, last[:1])}{last}{after}"


def _spaced(left: str, between: str, right: str) -> str:
    """The words ``between`` two items of a list (" 和 "), without the space the language's typography leaves
    out where an item's edge is Chinese too: ``w_q 和 w_k`` but ``「甲」和「乙」``, ``除以了 2 和乘以了 2``."""
    from .cjk import unspaced

    inner = between.strip(" ")
    if not inner or not unspaced(inner[0]) or not unspaced(inner[-1]):
        return between
    head = "" if left and unspaced(left) else between[: len(between) - len(between.lstrip(" "))]
    foot = "" if right and unspaced(right) else between[len(between.rstrip(" ")):]
    return f"{head}{inner}{foot}"


def join_sentences(sentences: Sequence[Text]) -> str:
    """Whole sentences as one paragraph, each after the one before by ``sentence.pair``: a space in English
    (``Right. Exactly 12.``), nothing after a Chinese full stop.  ``""`` for none.

    >>> join_sentences(["It is [2, 3].", "Axis 0 is B = 2."])
    'It is [2, 3]. Axis 0 is B = 2.'
    """
    if not sentences:
        return ""
    text = str(sentences[0])
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


# --- sentences as records -------------------------------------------------------------
# The engines (steps, mistakes, the audit, production, the NumPy mirror, the answer grammar) never
# translate: they return what to say as a key and its fields, a :class:`Msg`, and whoever shows it
# translates it, in the language in use *then* (``str(m)``, or ``{m}`` inside another template).  So a
# worked solution computed once and cached, or kept by a test that switches languages, speaks the
# language it is shown in, and a JSON consumer can read the key.  ``tests/test_engines_say_keys.py``
# holds every engine to it.


class Msg:
    """A sentence not yet put into words: a catalogue key and its fields (or a list of such parts).

    ``str(m)`` is the sentence in the language in use: :func:`t` of the key and fields
    (``Msg("check.more", count=3)``), :func:`plural` (:meth:`plural`), :func:`join_and`
    (:meth:`and_list`), :func:`join_sentences` (:meth:`sentences`) or the parts joined by a separator
    key (:meth:`joined`).  A field may itself be a ``Msg``; it is put into words with the rest.  Equal
    to a ``Msg`` with the same key, fields and parts, and to the ``str`` it says now (the hash is the
    record's: do not mix the two in one set).  Immutable, hashable when its fields are.

    >>> m = Msg("check.more", count=3)
    >>> str(m), m.key, dict(m.fields)
    ('… and 3 more', 'check.more', {'count': 3})
    """

    __slots__ = ("how", "key", "fields", "parts", "count")

    how: str
    key: str
    fields: tuple[tuple[str, object], ...]
    parts: tuple[Text, ...]
    count: int

    def __init__(self, key: str, /, **fields: object) -> None:
        self._set("t", key, fields, (), 0)

    def _set(self, how: str, key: str, fields: dict[str, object], parts: tuple[Text, ...], count: int) -> None:
        for name, value in (("how", how), ("key", key), ("fields", tuple(fields.items())), ("parts", parts),
                            ("count", count)):
            object.__setattr__(self, name, value)

    @classmethod
    def _make(cls, how: str, key: str = "", fields: dict[str, object] | None = None,
              parts: Sequence[Text] = (), count: int = 0) -> Msg:
        m = cls.__new__(cls)
        m._set(how, key, fields or {}, tuple(parts), count)
        return m

    @classmethod
    def plural(cls, key: str, count: int, /, **fields: object) -> Msg:
        """:func:`plural` of ``key`` for ``count``, put into words when shown."""
        return cls._make("plural", key, fields, count=count)

    @classmethod
    def and_list(cls, parts: Sequence[Text]) -> Msg:
        """:func:`join_and` of ``parts``: ``a, b and c``."""
        return cls._make("and", parts=parts)

    @classmethod
    def sentences(cls, parts: Sequence[Text]) -> Msg:
        """:func:`join_sentences` of ``parts``: one paragraph."""
        return cls._make("sentences", parts=parts)

    @classmethod
    def joined(cls, sep: str, parts: Sequence[Text]) -> Msg:
        """``parts`` joined by the separator the catalogue's key ``sep`` holds (``list.sep``, ``list.sep.clauses``)."""
        return cls._make("joined", sep, parts=parts)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("a Msg is immutable")

    def __str__(self) -> str:
        if self.how == "t":
            return t(self.key, **dict(self.fields))
        if self.how == "plural":
            return plural(self.key, self.count, **dict(self.fields))
        words = [str(p) for p in self.parts]
        if self.how == "and":
            return join_and(words)
        if self.how == "sentences":
            return join_sentences(words)
        return t(self.key).join(words)

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def _identity(self) -> tuple[object, ...]:
        return (self.how, self.key, self.fields, self.parts, self.count)

    def __eq__(self, other: object) -> bool:
        """Equal to a ``Msg`` with the same key, fields and parts, and to the sentence it says now (a ``str``)."""
        if isinstance(other, str):
            return str(self) == other
        return isinstance(other, Msg) and self._identity() == other._identity()

    def __contains__(self, text: str) -> bool:
        """``text`` occurs in the sentence it says now."""
        return text in str(self)

    def __hash__(self) -> int:
        return hash(self._identity())

    def __repr__(self) -> str:
        if self.how == "t":
            return f"Msg({self.key!r}{''.join(f', {k}={v!r}' for k, v in self.fields)})"
        return f"Msg.{self.how}({self.key!r}, {self.parts!r}, count={self.count}, fields={dict(self.fields)!r})"


#: What a record holds where a learner will read words: a sentence put into words already (notation,
#: a learner's own text) or a :class:`Msg` to be put into words when shown.
Text = str | Msg
