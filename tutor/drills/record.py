"""The record every drill shares: a question with its checked answer, and the verdict on a typed answer.

Pure data and pure functions: no I/O, no numpy.  A drill module
(:mod:`.shapes`, :mod:`.counts`, :mod:`.masks`, :mod:`.concepts`) builds
:class:`Question` records whose answers its code computed; :func:`grade`
judges a typed line against one, by the question's ``kind``:

* ``shape`` -- a list of sizes (``[2, 8, 5, 7]``, ``2x8x5x7``, ``(2,8,5,7)``);
  a wrong one is explained axis by axis (:func:`explain_shape`);
* ``count`` -- a whole number (``1,048,576``, ``1.05M``, ``16 GiB``); within
  :data:`COUNT_REL_TOL` of the answer is right; a wrong one is explained
  (:func:`count_fits`) by a known mistake or none, read as typed, in the other
  unit (GB for GiB) or as elements where bytes are asked, rounded as written
  or cut off -- each part named;
* ``matrix`` -- a small mask (``1 0 0; 1 1 0``, ``T F F; T T F``, ``0 -inf``);
  a known mistake's matrix (polarity inverted, transposed, misaligned) is named;
* ``choice`` -- a letter; the chosen wrong option says why it is wrong;
* ``free`` -- free text, graded by the learner against the key points
  (the driver asks; :func:`grade` only records it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_DOWN, ROUND_HALF_UP, Decimal, localcontext
from fractions import Fraction
from typing import Any, Literal

from ..base.errors import AnswerError
from ..base.halfwidth import halfwidth
from ..base.messages import join_sentences, t

Kind = Literal["shape", "count", "matrix", "choice", "free"]
Outcome = Literal["correct", "wrong", "invalid"]

#: A count within this relative distance of the answer is right (interview answers are often rounded:
#: "about 6.4 billion"); the exact value is shown beside it.
COUNT_REL_TOL = 0.01
MAX_ANSWER_CHARS = 500  # longest typed answer graded (and kept in the store)


@dataclass(frozen=True)
class Choice:
    """One option of a ``choice`` question: its letter, its text, whether it is right, and why not."""

    key: str
    text: str
    right: bool
    why: str = ""
    id: str = ""  # a name that does not depend on the letter (the diagnosis key of a wrong pick)


@dataclass(frozen=True)
class Variant:
    """A known mistake: the answer it gives, and the key and sentence that name it.

    For a count: ``also`` the other mistakes that give the same answer (either may be what happened),
    and ``slips`` the slips of :data:`READINGS` that may stack on it -- a unit written for the other
    one, elements for bytes -- none for a count that is not one of bytes (bits), only the unit for one
    of bytes of another dtype.
    """

    value: Any
    key: str
    message: str
    also: tuple[Variant, ...] = ()
    slips: tuple[str, ...] = ("unit", "elements")


@dataclass(frozen=True)
class Question:
    """One question of a drill, with the answer its code computed.

    ``drill`` is the drill's name (``shapes``, ``counts``, ``masks``,
    ``concepts``); ``topic`` what ``stats`` and the interview report group by
    (a shape point, a count kind, a mask convention, a concept topic);
    ``id`` a name unique within a run (``shapes-7-3``); ``prompt`` the
    question as the learner reads it; ``answer`` the checked answer
    (``list[int]`` for a shape, ``int`` for a count, a tuple of rows for a
    matrix, the right letter for a choice, ``None`` for free text) and
    ``answer_text`` the same as shown; ``config`` the configuration under the
    field's names (what ``--format json`` prints beside the answer);
    ``hint`` one line that helps without giving the answer; ``explain``
    lines shown after the verdict (a breakdown, the formula and its source);
    ``after`` lines shown after those (the mask in every convention, once a
    scenario's last question is answered); ``variants`` the known mistakes;
    ``dims``/``sizes``/``others`` (shapes) the axes by name, the named sizes
    and the other points' shapes, to say which axis is which;
    ``choices`` (choice); ``key_points``, ``model_answer``, ``wrong_answers``
    (free text: what a strong answer hits); ``follow_up`` the id of the
    question this one follows up; ``element`` (a count of bytes of a tensor's elements) the dtype and its
    bytes per element, to name a count of elements; ``json`` extra fields for ``--format json``, and ``json_answer`` those
    that give the answer away (printed only with ``--show-answers``).
    """

    drill: str
    topic: str
    id: str
    kind: Kind
    prompt: str
    answer: Any
    answer_text: str
    config: Mapping[str, Any] = field(default_factory=dict)
    hint: str = ""
    explain: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    variants: tuple[Variant, ...] = ()
    dims: tuple[str, ...] = ()
    sizes: Mapping[str, int] = field(default_factory=dict)
    others: tuple[tuple[str, tuple[int, ...]], ...] = ()
    choices: tuple[Choice, ...] = ()
    key_points: tuple[str, ...] = ()
    model_answer: str = ""
    wrong_answers: tuple[tuple[str, str], ...] = ()
    follow_up: str | None = None
    element: tuple[str, int] | None = None
    json: Mapping[str, Any] = field(default_factory=dict)
    json_answer: Mapping[str, Any] = field(default_factory=dict)

    @property
    def step(self) -> str:
        """The step name the progress store keeps this question's answers under: ``drill:<drill>:<topic>``."""
        return f"{DRILL_PREFIX}{self.drill}:{self.topic}"

    def document(self, answers: bool) -> dict[str, Any]:
        """The question as JSON data: ``id``, ``drill``, ``topic``, ``kind``, ``question``, the
        configuration's fields, ``choices`` (``[{"key", "text"}]``, with ``right`` and ``why`` when
        ``answers``), ``follow_up``; with ``answers`` also ``answer``, ``answer_text``, ``explain``,
        ``key_points``, ``model_answer`` and ``wrong_answers`` (``[{"answer", "why"}]``)."""
        doc: dict[str, Any] = {"id": self.id, "drill": self.drill, "topic": self.topic, "kind": self.kind,
                               "question": self.prompt}
        doc.update(self.config)
        doc.update(self.json)
        if self.choices:
            doc["choices"] = [{"key": c.key, "text": c.text, **({"right": c.right, "why": c.why} if answers else {})}
                              for c in self.choices]
        if self.follow_up is not None:
            doc["follow_up"] = self.follow_up
        if answers:
            doc.update(self.json_answer)
            doc["answer"] = _json_answer(self.answer)
            doc["answer_text"] = self.answer_text
            doc["explain"] = list(self.explain + self.after)
            if self.kind == "free":
                doc["key_points"] = list(self.key_points)
                doc["model_answer"] = self.model_answer
                doc["wrong_answers"] = [{"answer": a, "why": w} for a, w in self.wrong_answers]
        return doc


#: Drill answers live in the progress store's ``answers`` table beside practice answers, their step and
#: exercise names under this prefix (``drill:shapes:scores``, ``drill:shapes``): the schema is unchanged.
DRILL_PREFIX = "drill:"


def _json_answer(answer: Any) -> Any:
    """An answer as JSON data: ``-inf`` (an additive mask) as the string ``"-inf"``."""
    if isinstance(answer, float) and math.isinf(answer):
        return "-inf" if answer < 0 else "inf"
    if isinstance(answer, Fraction):  # a ratio or a time (issue 23): its value as a number
        return answer.numerator if answer.denominator == 1 else float(answer)
    if isinstance(answer, (list, tuple)):
        return [_json_answer(a) for a in answer]
    return answer


@dataclass(frozen=True)
class Verdict:
    """What a typed answer is: ``correct``, ``wrong`` or ``invalid`` (not an answer: nothing graded).

    ``message`` is the one line saying so (for ``invalid``, what is wrong with
    the text); ``details`` more lines (which axis is which); ``diagnosis``
    the key of the mistake recognised, with its sentence in ``details``;
    ``also`` the keys of what else was recognised with it (a count's unit or
    rounding slip beside a mistake, another mistake giving the same number).
    """

    outcome: Outcome
    message: str = ""
    details: tuple[str, ...] = ()
    diagnosis: str | None = None
    diagnosis_text: str | None = None
    also: tuple[str, ...] = ()


# --- parsing typed answers ---------------------------------------------------------------

_SHAPE_SPLIT = re.compile(r"[\s,x×*]+")


def parse_shape(text: str) -> list[int]:
    """A typed shape as its sizes: ``[2, 8, 5, 7]``, ``2x8x5x7``, ``(2,8,5,7)``, ``2 8 5 7``, ``torch.Size([2, 8])``.

    Raises :class:`AnswerError` (one sentence) for anything else.

    >>> parse_shape("[2, 8, 5, 7]"), parse_shape("2x8x5x7"), parse_shape("(2,8,5,7)"), parse_shape("(3,)")
    ([2, 8, 5, 7], [2, 8, 5, 7], [2, 8, 5, 7], [3])
    """
    body = text.strip()
    if len(body) > MAX_ANSWER_CHARS:
        raise AnswerError(t("drill.answer.too_long", limit=MAX_ANSWER_CHARS))
    if body.lower().startswith("torch.size(") and body.endswith(")"):
        body = body[len("torch.size("):-1].strip()
    for opening, closing in (("[", "]"), ("(", ")")):
        if body.startswith(opening) and body.endswith(closing):
            body = body[1:-1]
            break
    parts = [p for p in _SHAPE_SPLIT.split(body.strip()) if p]
    if not parts or not all(p.isdigit() and p.isascii() for p in parts):
        raise AnswerError(t("drill.shape.unreadable", text=_cut(text)))
    return [int(p) for p in parts]


_COUNT = re.compile(r"^(?P<num>[0-9][0-9,_ ]*(?:\.[0-9]+)?|\.[0-9]+)(?:[eE](?P<exp>[+-]?[0-9]{1,3}))?\s*(?P<unit>[A-Za-z]*)$")
_DECIMAL_UNITS = {"k": 10**3, "thousand": 10**3, "m": 10**6, "million": 10**6, "g": 10**9, "billion": 10**9,
                  "t": 10**12, "trillion": 10**12}
_BINARY_UNITS = {"ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}
_NAMES = {"", "b", "byte", "bytes", "flop", "flops", "param", "params", "parameters", "parameter"}
#: Issue 23: the word a count of these units may be typed with (``12.5 ms``, ``3 blocks``).
_UNIT_WORDS = {"ms": ("ms",), "blocks": ("block", "blocks"), "requests": ("request", "requests")}
#: The letter prefixes of a byte count, each with the one of the other system it is mistaken for
#: (a GB is 10^9 bytes, a GiB 2^30): the prefix as shown, then its factor.
PREFIXES = {"k": ("kB", 10**3), "m": ("MB", 10**6), "g": ("GB", 10**9), "t": ("TB", 10**12),
            "ki": ("KiB", 2**10), "mi": ("MiB", 2**20), "gi": ("GiB", 2**30), "ti": ("TiB", 2**40)}
TWIN = {"k": "ki", "m": "mi", "g": "gi", "t": "ti", "ki": "k", "mi": "m", "gi": "g", "ti": "t"}


@dataclass(frozen=True)
class TypedCount:
    """A typed count as written: ``number`` (the digits times ``10^exponent``: ``0.125``, ``6.4e9``) in a
    unit of ``scale`` (``2**30`` for GiB, ``10**9`` for G, GB or billion, 1 for none), exactly; ``text``
    what was typed, ``unit`` its unit as typed.

    ``decimals`` are the digits after the point (of the digits before ``e``), ``figures`` the significant
    digits; the number claims its value to within half a unit in its last place (``half``).  ``prefix``
    is a letter prefix of a byte count (``g``, ``gi``, … of :data:`PREFIXES`), ``""`` for none or a word.
    """

    text: str
    digits: str
    decimals: int
    exponent: int
    scale: int
    prefix: str = ""
    unit: str = ""  # the unit as typed: "GB", "billion", ""

    @property
    def number(self) -> Fraction:
        """The number written, exactly, in its unit: ``0.125`` for ``0.125 GB``, ``6400000000`` for ``6.4e9``."""
        return Fraction(self.digits) * Fraction(10) ** self.exponent

    @property
    def value(self) -> Fraction:
        """The count it says, exactly: ``125000000`` for ``0.125 GB``."""
        return self.number * self.scale

    @property
    def half(self) -> Fraction:
        """Half a unit in the last place written, in the number's own unit."""
        return Fraction(1, 2) * Fraction(10) ** (self.exponent - self.decimals)

    @property
    def figures(self) -> int:
        """The significant digits written (leading zeros are not): 3 for ``0.125``, 2 for ``52``."""
        return len(self.digits.replace(".", "").lstrip("0"))


def parse_count(text: str, unit: str) -> float:
    """A typed count as a number: ``1048576``, ``1,048,576``, ``1_048_576``, ``6.4e9``, ``6.4 billion``,
    ``16 GiB`` (2^30), ``16 GB`` (10^9), ``7B`` (for parameters and FLOPs: a billion; for bytes: bytes).

    ``unit`` is what is counted: ``bytes``, ``flops`` or ``params``.  Raises
    :class:`AnswerError` for anything else.

    >>> parse_count("1,048,576", "params"), parse_count("16 GiB", "bytes"), parse_count("7B", "params")
    (1048576.0, 17179869184.0, 7000000000.0)
    """
    return float(read_count(text, unit).value)


def read_count(text: str, unit: str) -> TypedCount:
    """A typed count as written (:class:`TypedCount`): what :func:`parse_count` reads, with its precision
    and its unit kept.  Raises :class:`AnswerError` for anything else.

    >>> c = read_count("0.125 GB", "bytes"); c.value, c.decimals, c.prefix
    (Fraction(125000000, 1), 3, 'g')
    """
    body = text.strip().replace("\u2009", "").replace("\u202f", "")
    if len(body) > MAX_ANSWER_CHARS:
        raise AnswerError(t("drill.answer.too_long", limit=MAX_ANSWER_CHARS))
    m = _COUNT.match(body)
    if m is None:
        raise AnswerError(t("drill.count.unreadable", text=_cut(text)))
    digits = re.sub(r"[,_ ]", "", m.group("num"))
    exp = int(m.group("exp") or 0)
    try:
        value = float(digits) * 10.0 ** exp
    except OverflowError:  # 1e999: no count is that large
        value = math.inf
    if not math.isfinite(value):
        raise AnswerError(t("drill.count.unreadable", text=_cut(text)))
    decimals = len(digits.partition(".")[2])

    def typed(scale: int, prefix: str = "") -> TypedCount:
        return TypedCount(body, digits, decimals, exp, scale, prefix, m.group("unit"))

    word = m.group("unit").lower()
    if word == "b" and unit != "bytes":  # "7B parameters": a billion
        return typed(10**9)
    for suffix in ("bytes", "byte", "flops", "flop", "params", "parameters", "parameter", "b"):
        if word.endswith(suffix) and word[:-len(suffix)] in _DECIMAL_UNITS | _BINARY_UNITS:
            word = word[:-len(suffix)]
            break
    if word in _NAMES or word in _UNIT_WORDS.get(unit, ()):
        return typed(1)
    prefix = word if unit == "bytes" and word in PREFIXES else ""
    if word in _DECIMAL_UNITS:
        return typed(_DECIMAL_UNITS[word], prefix)
    if word in _BINARY_UNITS:
        return typed(_BINARY_UNITS[word], prefix)
    raise AnswerError(t("drill.count.unit", unit=_cut(m.group("unit")), text=_cut(text)))


_BOOL_TOKEN = re.compile(r"[01]")
_ADDITIVE_TOKEN = re.compile(r"-?inf|[-+]?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?", re.IGNORECASE)
_TRUE = re.compile(r"(?i)(?<![A-Za-z])(true|t)(?![A-Za-z])")
_FALSE = re.compile(r"(?i)(?<![A-Za-z])(false|f)(?![A-Za-z])")


def parse_mask(text: str, *, additive: bool) -> tuple[tuple[float, ...], ...]:
    """A typed mask as rows of numbers: booleans as 1/0 (``1 0; 1 1``, ``T F; T T``,
    ``[[True, False], [True, True]]``), an additive mask's entries as numbers (``0 -inf; 0 0``).

    ``additive``: the entries are numbers (``-inf`` allowed); otherwise each
    must be 1/0 or true/false.  Raises :class:`AnswerError`.

    >>> parse_mask("T F; t f", additive=False), parse_mask("0 -inf", additive=True)
    (((1.0, 0.0), (1.0, 0.0)), ((0.0, -inf),))
    """
    from ..answers import parse_matrix

    if len(text) > MAX_ANSWER_CHARS:
        raise AnswerError(t("drill.answer.too_long", limit=MAX_ANSWER_CHARS))
    body = text.replace("\u2212\u221e", "-inf").replace("\u221e", "inf").replace("\u2212", "-")
    if not additive:
        body = _FALSE.sub("0", _TRUE.sub("1", body))
    tokens = [tok for tok in re.split(r"[\s,;\[\]()]+", body) if tok]
    allowed = _ADDITIVE_TOKEN if additive else _BOOL_TOKEN
    if not tokens or not all(allowed.fullmatch(tok) for tok in tokens):
        raise AnswerError(t("drill.mask.not_additive" if additive else "drill.mask.not_bool", text=_cut(text)))
    rows = tuple(tuple(float(e.value()) for e in row) for row in parse_matrix(body))
    if not additive and any(v not in (0.0, 1.0) for row in rows for v in row):
        raise AnswerError(t("drill.mask.not_bool", text=_cut(text)))
    return rows


def _cut(text: str, limit: int = 40) -> str:
    from ..base.textsafe import shown

    text = text.strip()
    return shown(text if len(text) <= limit else text[:limit] + "…")


# --- grading ------------------------------------------------------------------------------


def grade(q: Question, text: str) -> Verdict:
    """Judge the typed ``text`` as an answer to ``q`` (not for ``free`` questions, which the learner grades).

    Never raises for what was typed: unreadable text is an ``invalid`` verdict saying why.
    """
    if "\ufffd" in text:  # what the line reader made of bytes the stream could not decode (practice.terminal.Lines)
        return Verdict("invalid", t("drill.answer.undecodable", column=text.index("\ufffd") + 1))
    if q.kind != "free":  # a Chinese input method's full-width digits and punctuation, as ASCII
        text = halfwidth(text)
    try:
        if q.kind == "shape":
            return _grade_shape(q, parse_shape(text))
        if q.kind == "count":
            return _grade_count(q, read_count(text, str(q.json.get("unit", ""))))
        if q.kind == "matrix":
            return _grade_matrix(q, parse_mask(text, additive=bool(q.json.get("additive"))))
        if q.kind == "choice":
            return _grade_choice(q, text)
    except AnswerError as err:
        return Verdict("invalid", str(err))
    raise ValueError(f"questions of kind {q.kind!r} are graded by the learner")


def _grade_shape(q: Question, found: list[int]) -> Verdict:
    if found == list(q.answer):
        return Verdict("correct")
    lines = explain_shape(q.dims, tuple(q.answer), tuple(found), q.sizes, q.others, q.topic)
    return Verdict("wrong", t("drill.shape.expected", dims=_dims(q.dims), shape=_sizes(q.answer)), tuple(lines[1:]),
                   "drill.shape." + lines[0], join_sentences(lines[1:]) or None)


def _dims(dims: Sequence[str]) -> str:
    return "[" + ", ".join(dims) + "]"


def _sizes(shape: Sequence[int]) -> str:
    return "[" + ", ".join(str(n) for n in shape) + "]"


def explain_shape(dims: Sequence[str], expected: tuple[int, ...], found: tuple[int, ...], sizes: Mapping[str, int],
                  others: Sequence[tuple[str, tuple[int, ...]]], point: str) -> list[str]:
    """Which axis is which, for a wrong shape: the first item is the kind of mistake (``other_point``,
    ``axes``, ``order``, ``rank``), the rest the sentences that explain it."""
    lines: list[str] = []
    kind = "axes"
    match = [name for name, shape in others if shape == found and name != point]
    if match:
        kind = "other_point"
        lines.append(t("drill.shape.other_point", points=", ".join(match)))
    if len(found) != len(expected):
        lines.append(t("drill.shape.rank", expected=len(expected), found=len(found)))
        return [kind if match else "rank"] + lines
    if sorted(found) == sorted(expected):
        kind = "order" if not match else kind
        lines.append(t("drill.shape.order"))
    for axis, (name, want, got) in enumerate(zip(dims, expected, found, strict=True)):
        if want != got:
            known = [n for n, v in sizes.items() if v == got and n != name and _is_plain(n)]
            fields = {"axis": axis, "name": name, "value": want, "found": got}
            lines.append(t("drill.shape.wrong_axis.that_is", **fields, names=t("list.sep.or").join(known)) if known
                         else t("drill.shape.wrong_axis", **fields))
    return [kind] + lines


def _is_plain(name: str) -> bool:
    return name.replace("_", "").isalnum()


def count_tolerance(q: Question) -> float:
    """How far (relative) a count may be from ``q``'s answer: :data:`COUNT_REL_TOL`, or 0 -- the exact
    count -- when a known mistake gives a value that close (the biases of a large layer are under 1%)."""
    answer = Fraction(q.answer)
    if any(_near(Fraction(v.value), answer, COUNT_REL_TOL) for v in q.variants):
        return 0.0
    return COUNT_REL_TOL


def _grade_count(q: Question, typed: TypedCount) -> Verdict:
    """Right (the answer, or within :func:`count_tolerance` of it); else wrong, with the explanations of
    :func:`count_fits` as ``details`` (under "Each of these gives that number" when several), the key
    of the first one's mistake (or slip) as ``diagnosis`` and the rest in ``also``."""
    answer = Fraction(q.answer)
    tol = count_tolerance(q)
    found = typed.value
    if found == answer:
        return Verdict("correct")
    if tol and _near(found, answer, tol):
        return Verdict("correct", t("drill.count.approx", answer=_count_text(answer)))
    expected = t("drill.count.expected", answer=_count_text(answer))
    fits = count_fits(q, typed, tol)
    if not fits:
        return Verdict("wrong", expected)
    lines = [_explained(q, typed, f, tol) for f in fits]
    details = ((t("drill.count.either"),) if len(lines) > 1 else ()) + tuple(lines)
    keys = list(dict.fromkeys(k for f in fits for k in f.keys))
    return Verdict("wrong", expected, details, keys[0], join_sentences(lines), tuple(keys[1:]))


def _count_text(x: Fraction) -> str:
    """A count as the verdict shows it: ``1,048,576``; a ratio or a time to 4 significant figures (issue 23)."""
    return f"{x.numerator:,}" if x.denominator == 1 else _decimal(x, 4)[0]


def _near(found: float | Fraction, answer: Fraction | int, tol: float) -> bool:
    """Whether ``found`` is within ``tol`` (relative, compared exactly) of ``answer``."""
    if answer == 0:
        return found == 0
    return abs(Fraction(found) - answer) <= Fraction(str(tol)) * abs(Fraction(answer))


# --- a wrong count explained ----------------------------------------------------------------
# A typed count is explained by a mistake (one of the question's variants, or none: the answer) read one
# of three ways -- as typed, in the other system's unit (GiB written GB: a GiB is 2^30 bytes, a GB 10^9),
# or as the count of elements where their bytes are asked -- and rounded as written (the number claims
# its value to within half a unit in its last place; read as typed, within 1% will do) or cut off
# instead of rounded.  The
# explanations of the fewest parts that fit are named, the closest first; several that give the same
# number are all named (either could be what happened).  A unit slip and an element slip are not
# stacked (the unit would then be a prefix of elements, not of bytes), nor is either stacked on a
# mistake that does not count bytes of this dtype (bits; 4 bytes an element): a variant's ``slips``.

#: The readings of a typed count: as typed; in the other unit of its prefix; as elements, not bytes.
READINGS = ("typed", "unit", "elements")
#: The most parts an explanation may have (a mistake and one slip): with three, a number typed to 2
#: significant figures is explained by chance too often.
MAX_PARTS = 2
#: How a typed number stands to a count: equal; rounded as written (or within the grading's 1%); cut
#: off at its decimals; the answer itself, rounded further than the grading allows.
How = Literal["exact", "rounded", "truncated", "coarse"]


@dataclass(frozen=True)
class CountFit:
    """One explanation of a typed count: ``mistake`` (``None``: the answer itself) giving the count
    ``value``, read as ``reading`` (of :data:`READINGS`), which makes it ``number`` in the unit the typed
    number is read in; ``how`` the typed number stands to ``number``."""

    value: Fraction
    mistake: Variant | None
    reading: str
    number: Fraction
    how: How

    @property
    def parts(self) -> int:
        """How many things went wrong: a mistake, a unit or elements slip, a number cut off or rounded too far."""
        return (self.mistake is not None) + (self.reading != "typed") + (self.how in ("truncated", "coarse"))

    @property
    def keys(self) -> tuple[str, ...]:
        """The keys of what it names, the mistake first: ``drill.counts.kv.no_two``, ``drill.count.slip.unit``, …"""
        keys = [self.mistake.key] if self.mistake else []
        keys += [f"drill.count.slip.{self.reading}"] if self.reading != "typed" else []
        keys += [f"drill.count.slip.{self.how}"] if self.how in ("truncated", "coarse") else []
        return tuple(keys)


def count_fits(q: Question, typed: TypedCount, tol: float) -> list[CountFit]:
    """The explanations of a wrong count ``typed`` (not within the grading's tolerance ``tol`` of ``q``'s
    answer): of those with the fewest parts (at most :data:`MAX_PARTS`), the closest and every other
    reaching the same number, closest first; ``[]`` when none fits.  Read as typed, a number within
    ``tol`` of a mistake's count fits it; read with a slip, only one that is the count rounded as written."""
    mistakes: list[Variant | None] = [None]
    for v in q.variants:
        mistakes += [v, *v.also]
    readings: list[tuple[str, int, int]] = [("typed", typed.scale, 1)]  # reading, unit scale, elements per count
    if typed.prefix:
        readings.append(("unit", PREFIXES[TWIN[typed.prefix]][1], 1))
    if q.element is not None and q.element[1] > 1:
        readings.append(("elements", typed.scale, q.element[1]))
    found: list[tuple[tuple[int, Fraction, int, int], CountFit]] = []
    for r, (reading, scale, per) in enumerate(readings):
        for m, mistake in enumerate(mistakes):
            if mistake is not None and reading != "typed" and reading not in mistake.slips:
                continue
            value = Fraction(q.answer if mistake is None else mistake.value)
            x = value / per / scale
            how = _fit(x, typed, tol if reading == "typed" else 0.0, answer=mistake is None and reading == "typed")
            if how is None or x <= 0:
                continue
            fit = CountFit(value, mistake, reading, x, how)
            if fit.parts <= MAX_PARTS:
                found.append(((fit.parts, abs(x - typed.number) / x, r, m), fit))
    if not found:
        return []
    found.sort(key=lambda f: f[0])
    parts, best = found[0][0][0], found[0][1]
    return [f for (p, *_), f in found if p == parts and f.number == best.number]


def _fit(x: Fraction, typed: TypedCount, tol: float, *, answer: bool) -> How | None:
    """How the typed number stands to ``x`` (a count in the number's unit; ``answer``: the answer as
    typed, which is wrong): ``exact``; ``rounded``, within ``tol`` (relative) or within half a unit in
    its last place; ``truncated``, ``x`` cut off at its decimals; ``coarse``, the answer rounded where
    only a closer number counts; ``None`` when none is so.  The written precision counts only when it is
    at most 1% of the number (``52``, ``0.125``; not ``12``, whose ±4% would fit some mistake by chance),
    except for the answer: a number that is it rounded is that, however coarse."""
    n = typed.number
    if x == n:
        return "exact"
    precise = typed.half * 100 <= n
    if answer:  # within tol it was right: rounded (or cut off where only the exact count is right), too far
        near = abs(x - n) <= typed.half or (precise and n < x < n + 2 * typed.half and not tol)
        return "coarse" if near else "truncated" if precise and n < x < n + 2 * typed.half else None
    if (tol and abs(x - n) <= Fraction(str(tol)) * x) or (precise and abs(x - n) <= typed.half):
        return "rounded"
    if precise and n < x < n + 2 * typed.half:
        return "truncated"
    return None


def _explained(q: Question, typed: TypedCount, f: CountFit, tol: float) -> str:
    """The sentences that name one explanation: the mistake's, then each slip's (an ``.also`` form after another)."""
    figures = max(4, typed.figures + 1)
    if f.how == "coarse":
        value = _about(_typed_form(f.number, typed, figures))
        return t("drill.count.slip.coarse" if tol else "drill.count.slip.coarse.exact", written=typed.text, value=value)
    said = [f.mistake.message] if f.mistake else []

    def slip(key: str, **fields: object) -> None:
        said.append(t(f"{key}.also" if said else key, **fields))

    if f.reading == "unit":
        meant = TWIN[typed.prefix]
        meant_value = _decimal(f.value / PREFIXES[meant][1], figures)
        typed_value = _decimal(f.value / typed.scale, figures)
        slip("drill.count.slip.unit", meant=PREFIXES[meant][0], meant_size=_prefix_size(meant),
             typed=typed.unit, typed_size=_prefix_size(typed.prefix), count=_decimal(f.value, 0)[0],
             meant_value=_about(meant_value), typed_value=_about(typed_value))
    elif f.reading == "elements":
        assert q.element is not None  # read as elements only when the question counts them
        dtype, size = q.element
        slip("drill.count.slip.elements", dtype=dtype, size=size, elements=_decimal(f.value / size, 0)[0],
             bytes=_decimal(f.value, 0)[0])
    elif f.mistake is not None and f.how == "rounded":
        n, half = typed.number, typed.half
        key = "drill.count.rounds" if abs(f.number - n) <= half else "drill.count.near"
        said.append(t(key, count=_count_text(f.value), written=typed.text))
    if f.how == "truncated":
        e = f"e{typed.exponent}" if typed.exponent else ""
        scaled = f.number / Fraction(10) ** typed.exponent
        places = t("drill.count.to_whole") if typed.decimals == 0 else t("drill.count.to_places", places=typed.decimals)
        slip("drill.count.slip.truncated", value=_cut_off(scaled, typed.decimals + 4) + e, places=places,
             rounded=_fixed(scaled, typed.decimals) + e, written=typed.digits + e)
    return join_sentences(said)


def _prefix_size(prefix: str) -> str:
    """What one unit of ``prefix`` holds: ``2^30 bytes`` for ``gi``, ``10^9 bytes`` for ``g``."""
    size = PREFIXES[prefix][1]
    power = f"2^{size.bit_length() - 1}" if prefix.endswith("i") else f"10^{len(str(size)) - 1}"
    return t("drill.count.prefix_size", power=power)


def _typed_form(x: Fraction, typed: TypedCount, figures: int) -> tuple[str, bool]:
    """``x`` (in the typed number's unit) written as the typed number is (``0.1031 TB``, ``5.154e10``),
    and whether that is exact."""
    text, exact = _decimal(x / Fraction(10) ** typed.exponent, figures)
    e = f"e{typed.exponent}" if typed.exponent else ""
    return text + e + (f" {typed.unit}" if typed.unit else ""), exact


def _about(shown: tuple[str, bool]) -> str:
    """A number as :func:`_decimal` shows it, with "about" before it when it is rounded."""
    text, exact = shown
    return text if exact else t("drill.count.about", value=text)


def _decimal(x: Fraction, figures: int) -> tuple[str, bool]:
    """``x`` in full when that takes at most ``figures`` + 3 significant figures (``0.0078125``), else to
    ``figures`` (0: to a whole number), whole digits never dropped; trailing zeros after the point
    dropped, thousands separated (``0.2684``, ``51.54``, ``1,073,741,824``); and whether that is ``x``
    exactly."""
    with localcontext() as ctx:
        ctx.prec = 80
        d = Decimal(x.numerator) / Decimal(x.denominator)
        full = figures + 3 if figures else 0
        for n in (full, figures):
            places = max(0, n - 1 - d.adjusted()) if n and x else 0
            q = d.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
            if Fraction(q) == x:
                break
    text = f"{q:,f}"
    return (text.rstrip("0").rstrip(".") if "." in text else text), Fraction(q) == x


def _fixed(x: Fraction, places: int) -> str:
    """``x`` rounded to ``places`` decimals (half up), as written: ``52``, ``0.13``."""
    with localcontext() as ctx:
        ctx.prec = 80
        d = Decimal(x.numerator) / Decimal(x.denominator)
        return f"{d.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP):f}"


def _cut_off(x: Fraction, places: int) -> str:
    """``x`` cut off after ``places`` decimals, with ``…`` when digits were dropped (trailing zeros too):
    ``51.5396…``, ``0.1875``."""
    with localcontext() as ctx:
        ctx.prec = 80
        d = Decimal(x.numerator) / Decimal(x.denominator)
        cut = d.quantize(Decimal(1).scaleb(-places), rounding=ROUND_DOWN)
    text = f"{cut:f}"
    text = text.rstrip("0").rstrip(".") if "." in text else text
    return text if Fraction(cut) == x else text + "…"


def _grade_matrix(q: Question, found: tuple[tuple[float, ...], ...]) -> Verdict:
    expected = tuple(tuple(float(v) for v in row) for row in q.answer)
    if found == expected:
        return Verdict("correct")
    for v in q.variants:
        if found == tuple(tuple(float(x) for x in row) for row in v.value):
            return Verdict("wrong", t("drill.mask.expected"), (v.message,), v.key, v.message)
    rows, cols = len(expected), len(expected[0])
    if (len(found), len(found[0])) != (rows, cols):
        return Verdict("wrong", t("drill.mask.expected"), (t("drill.mask.shape", rows=rows, cols=cols,
                                                             found_rows=len(found), found_cols=len(found[0])),))
    wrong = [f"({i}, {j})" for i in range(rows) for j in range(cols) if found[i][j] != expected[i][j]]
    return Verdict("wrong", t("drill.mask.expected"), (t("drill.mask.cells", cells=", ".join(wrong)),))


def _grade_choice(q: Question, text: str) -> Verdict:
    key = text.strip().upper().rstrip(").")
    chosen = next((c for c in q.choices if c.key == key), None)
    if chosen is None:
        raise AnswerError(t("drill.choice.unknown", text=_cut(text), keys=", ".join(c.key for c in q.choices)))
    if chosen.right:
        return Verdict("correct")
    right = next(c for c in q.choices if c.right)
    return Verdict("wrong", t("drill.choice.expected", key=right.key, text=right.text), (chosen.why,) if chosen.why else (),
                   f"drill.{q.drill}.{q.topic}.{chosen.id or chosen.key}", chosen.why or None)


def lettered(options: Sequence[tuple[str, str, bool, str]]) -> tuple[Choice, ...]:
    """Options ``(id, text, right, why)`` as :class:`Choice` records lettered ``A``, ``B``, … in the order given."""
    return tuple(Choice(chr(ord("A") + i), text, right, why, id_) for i, (id_, text, right, why) in enumerate(options))
