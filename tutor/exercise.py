"""The exercise file format (v1): pydantic schema and the one loader.

The contract is ``docs/exercise-format.md``.  Loading goes in three passes,
each collecting *every* problem it finds, each with file, line, column and
field, and all three run on whatever the earlier ones left valid, so one
run reports every mistake (:func:`validate_document`):

1. :func:`tutor.yamlread.parse_yaml` - YAML syntax and YAML traps;
2. :class:`ExerciseFile` (pydantic, ``extra="forbid"``) - fields and entry types;
   when it fails, each field is validated on its own (:func:`_partial`);
3. :func:`_check` - the two forms, shapes that must chain, and the limits,
   on the fields that are valid.

The result is a :class:`tutor.model.Exercise` with exact ``Fraction`` entries.
No entry is ever evaluated as code: numbers are read from their text by
regular expressions and :class:`fractions.Fraction`.
"""

from __future__ import annotations

import difflib
import functools
import math
import re
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from types import SimpleNamespace
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PlainValidator,
    Tag,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
)
from pydantic_core import PydanticCustomError

from . import model
from .errors import ExerciseError, Problem
from .messages import t
from .yamlread import (
    Document,
    Path,
    YNum,
    ascii_look_alike,
    codepoints,
    describe,
    format_path,
    parse_yaml,
    read_text,
    shown,
)

LIMITS = {"L": 16, "L_k": 16, "d_model": 32, "d_kv": 32, "d_k": 32, "d_v": 32, "d_out": 32, "heads": 8}
MAX_ENTRY_CHARS = 40
MAX_EXPONENT = 20
MAX_MAGNITUDE = 10**6  # a hand calculation has no use for larger entries; tables stay readable
# The exact engine writes each matrix over one common denominator (tutor.exact.QMat); bounding it keeps every
# integer the engine forms below ~1e180 (products of x, weights, biases, w_o over L, d <= 32), so exact texts stay
# printable and nothing overflows a float: an entry, and the entries of one matrix or vector together, need a
# denominator of at most 10^24 (1e-20 written with four more digits, 1.234e-20, still fits).
MAX_DENOMINATOR_DIGITS = 24
MAX_DENOMINATOR = 10**MAX_DENOMINATOR_DIGITS

# --- entries ---------------------------------------------------------------

_DECIMAL = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE](?P<exp>[-+]?[0-9]+))?")
_FRACTION = re.compile(r"(?P<num>[-+]?[0-9]+)\s*/\s*(?P<den>[-+]?[0-9]+)")
RADIX = re.compile(r"[-+]?0[oOxXbB][0-9a-fA-F_]+")
SEXAGESIMAL = re.compile(r"[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?")
_NOT_FINITE = re.compile(r"[-+]?\.?(inf|infinity|nan)", re.IGNORECASE)
YAML11_BOOL = {"yes", "no", "on", "off", "y", "n"}
MINUS_SIGN = "\u2212"  # typographic minus, as pasted from papers and slides: read as '-' wherever numbers are read


def _fail(expected: str, found: Any, hint: str = "") -> PydanticCustomError:
    return PydanticCustomError("tutor", "{message}", {"message": t("schema.expected", expected=expected, found=describe(found)), "hint": hint})


def parse_entry(value: Any) -> Fraction:
    """Read one matrix entry exactly; refuse magnitudes beyond :data:`MAX_MAGNITUDE` and
    denominators (in lowest terms) beyond :data:`MAX_DENOMINATOR`.

    See :func:`_read_entry` for what is accepted.  Raises ``PydanticCustomError``.
    """
    q = _read_entry(value)
    if abs(q) > MAX_MAGNITUDE:
        raise _fail(t("expected.number"), value, t("hint.magnitude", limit=f"{MAX_MAGNITUDE:,}"))
    if q.denominator > MAX_DENOMINATOR:
        raise _fail(t("expected.number"), value, t("hint.denominator", digits=len(str(q.denominator)),
                                                   limit=MAX_DENOMINATOR_DIGITS))
    return q


def _read_entry(value: Any) -> Fraction:
    """Read one matrix entry exactly.

    Accepts an int, a :class:`YNum` or string holding an integer, a decimal
    (``0.1`` is 1/10), an exponent form (``1e3``) or a fraction (``"-2/5"``),
    a ``Fraction``, or a float (read from its shortest repr).  Raises
    ``PydanticCustomError`` (type ``tutor``) with the message and a hint.
    """
    if isinstance(value, str):
        text = value.strip()
        if text.isascii() and text.isdigit() and len(text) <= MAX_ENTRY_CHARS:  # the common case, fast
            return Fraction(int(text))
    def bad(hint: str = "") -> PydanticCustomError:  # worded only when an entry is wrong
        return _fail(t("expected.number"), value, hint)

    if isinstance(value, bool) or value is None or isinstance(value, (list, dict)):
        hint = t("hint.quote_fraction") if isinstance(value, dict) else ""
        raise bad(hint)
    if isinstance(value, Fraction):
        return value
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise bad(t("hint.not_finite"))
        return Fraction(repr(value))
    if not isinstance(value, str):
        raise bad()
    text = value.strip().replace(MINUS_SIGN, "-")
    if len(text) > MAX_ENTRY_CHARS:
        raise bad(t("hint.too_long", limit=MAX_ENTRY_CHARS))
    if m := _DECIMAL.fullmatch(text):
        if m["exp"] is not None and abs(int(m["exp"])) > MAX_EXPONENT:
            raise bad(t("hint.exponent", limit=MAX_EXPONENT))
        return Fraction(text)
    if m := _FRACTION.fullmatch(text):
        if int(m["den"]) == 0:
            raise bad(t("hint.div_zero"))
        return Fraction(int(m["num"]), int(m["den"]))
    if text.lower() in YAML11_BOOL:
        raise bad(t("hint.yaml11_bool", text=text))
    if SEXAGESIMAL.fullmatch(text):
        raise bad(t("hint.base60.text", text=text))
    if RADIX.fullmatch(text):
        raise bad(t("hint.radix"))
    if _NOT_FINITE.fullmatch(text):
        raise bad(t("hint.not_finite"))
    raise bad()


def _parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    hint = t("hint.yaml11_flag", text=value) if isinstance(value, str) and value.lower() in YAML11_BOOL else ""
    raise _fail(t("expected.boolean"), value, hint)


def _parse_text(value: Any) -> str:
    if isinstance(value, str):  # YNum too: a title may be "2024"
        return str(value)
    raise _fail(t("expected.text"), value)


def _parse_int(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and len(value) > MAX_ENTRY_CHARS:  # never converted: Python refuses over 4,300 digits
        raise _fail(t("expected.integer"), value, t("hint.too_long", limit=MAX_ENTRY_CHARS))
    if isinstance(value, str) and (isinstance(value, YNum) or MINUS_SIGN in value):
        text = value.strip().replace(MINUS_SIGN, "-")
        if re.fullmatch(r"[-+]?[0-9]+", text):
            return int(text)
    raise _fail(t("expected.integer"), value)


def _parse_positive(value: Any) -> int:
    n = _parse_int(value)
    if n < 1:
        raise _fail(t("expected.positive"), value)
    return n


def _parse_difficulty(value: Any) -> int:
    n = _parse_int(value)
    if not 1 <= n <= 5:
        raise _fail(t("expected.difficulty"), value)
    return n


def _parse_slug(value: Any) -> str:
    if isinstance(value, str) and re.fullmatch(r"[a-z0-9][a-z0-9-]*", value) and len(value) <= 64:
        return str(value)
    raise _fail(t("expected.slug"), value)


_NUMBER_SCHEMA = {
    "oneOf": [
        {"type": "number"},
        {"type": "string", "pattern": r"^\s*[-+]?[0-9]+\s*/\s*[-+]?[0-9]+\s*$"},
        {"type": "string", "pattern": r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$"},
    ],
    "description": "an integer, a decimal (read exactly: 0.1 is 1/10) or a fraction as text (\"1/3\")",
}

Entry = Annotated[Fraction, PlainValidator(parse_entry), WithJsonSchema(_NUMBER_SCHEMA)]
Flag = Annotated[bool, PlainValidator(_parse_bool), WithJsonSchema({"type": "boolean"})]
Text = Annotated[str, PlainValidator(_parse_text), WithJsonSchema({"type": "string"})]
Slug = Annotated[str, PlainValidator(_parse_slug), WithJsonSchema({"type": "string", "pattern": "^[a-z0-9][a-z0-9-]*$", "maxLength": 64})]
PositiveInt = Annotated[int, PlainValidator(_parse_positive), WithJsonSchema({"type": "integer", "minimum": 1})]
Difficulty = Annotated[int, PlainValidator(_parse_difficulty), WithJsonSchema({"type": "integer", "minimum": 1, "maximum": 5})]
MatrixField = Annotated[list[Annotated[list[Entry], Field(min_length=1)]], Field(min_length=1)]
VectorField = Annotated[list[Entry], Field(min_length=1)]
MaskName = Literal["none", "causal"]
MaskField = Annotated[
    Annotated[MaskName, Tag("#name")] | Annotated[list[list[Flag]], Tag("#matrix")],
    Discriminator(lambda v: "#name" if isinstance(v, str) else "#matrix"),
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class HeadBlock(_Strict):
    """One head in the per-head form."""

    w_q: MatrixField = Field(description="[d_model, d_k]: Q = x W_Q + b_Q")
    w_k: MatrixField = Field(description="[d_kv, d_k]: K = x_kv W_K + b_K (x_kv is x in self-attention)")
    w_v: MatrixField = Field(description="[d_kv, d_v]: V = x_kv W_V + b_V")
    b_q: VectorField | None = Field(None, description="[d_k]")
    b_k: VectorField | None = Field(None, description="[d_k]")
    b_v: VectorField | None = Field(None, description="[d_v]")


class ExerciseFile(_Strict):
    """An attn-tutor exercise (format v1). Row vectors: a projection is x @ W with W [d_in, d_out]."""

    model_config = ConfigDict(title="attn-tutor exercise (v1)")

    id: Slug = Field(description="unique name; `attn-tutor explain ID` finds it")
    title: Text = Field(description="one line")
    description: Text = Field("", description="Markdown shown above the worked solution")
    x: MatrixField = Field(description="[L, d_model]: the input sequence; rows are tokens")
    tokens: list[Text] | None = Field(None, description="L labels for the rows of x")
    x_kv: MatrixField | None = Field(None, description="[L_k, d_kv]: cross-attention; K and V come from this sequence")
    kv_tokens: list[Text] | None = Field(None, description="L_k labels for the rows of x_kv")
    heads: Annotated[list[HeadBlock], Field(min_length=1)] | None = Field(None, description="per-head form")
    num_heads: PositiveInt | None = Field(None, description="fused form: number of heads")
    w_q: MatrixField | None = Field(None, description="fused form: [d_model, num_heads*d_k]; head h uses columns h*d_k:(h+1)*d_k")
    w_k: MatrixField | None = Field(None, description="fused form: [d_kv, num_heads*d_k]")
    w_v: MatrixField | None = Field(None, description="fused form: [d_kv, num_heads*d_v]")
    b_q: VectorField | None = Field(None, description="fused form: [num_heads*d_k]")
    b_k: VectorField | None = Field(None, description="fused form: [num_heads*d_k]")
    b_v: VectorField | None = Field(None, description="fused form: [num_heads*d_v]")
    w_o: MatrixField | None = Field(None, description="[num_heads*d_v, d_out]: output projection")
    b_o: VectorField | None = Field(None, description="[d_out]: output bias")
    mask: MaskField | None = Field(None, description="none, causal (key j visible to query i iff j <= i), or [L, L_k] booleans, true = may attend")
    key_padding: list[Flag] | None = Field(None, description="L_k booleans; false marks a padding key no query may attend")
    tags: list[Text] = Field(default_factory=list)
    difficulty: Difficulty | None = Field(None, description="1 (easy) to 5")


_MATRIX_FIELDS = {"x", "x_kv", "w_q", "w_k", "w_v", "w_o", "mask"}
_FIELD_NAMES = {"": set(ExerciseFile.model_fields), "heads": set(HeadBlock.model_fields)}


def json_schema() -> dict[str, Any]:
    """The JSON Schema of the format, from the model the loader uses."""
    schema = ExerciseFile.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


# --- pydantic errors -> problems --------------------------------------------


_VECTOR_ENTRIES = {"b_q": "expected.number", "b_k": "expected.number", "b_v": "expected.number",
                   "b_o": "expected.number", "key_padding": "expected.boolean", "tokens": "expected.text",
                   "kv_tokens": "expected.text", "tags": "expected.text"}


def _expected_for(path: Path) -> str:
    """What the value at ``path`` must be: a matrix, a row, an entry of a matrix or a vector, a mapping, a list."""
    names = [p for p in path if isinstance(p, str)]
    name = names[-1] if names else ""
    depth = len(path) - (max(i for i, p in enumerate(path) if isinstance(p, str)) + 1) if names else 0
    if name in _MATRIX_FIELDS:
        if depth >= 2:  # an entry
            return t("expected.boolean") if name == "mask" else t("expected.number")
        return t("expected.matrix") if depth == 0 else t("expected.row")
    if name in _VECTOR_ENTRIES and depth >= 1:
        return t(_VECTOR_ENTRIES[name])
    if name == "heads" and depth == 1 or not path:
        return t("expected.mapping")
    return t("expected.list")


def _clean(loc: tuple[Any, ...]) -> Path:
    """A pydantic location without the discriminator tags (``#name``/``#matrix``)."""
    return tuple(p for p in loc if not (isinstance(p, str) and p.startswith("#")))


def _related(path: Path, poisoned: set[Path]) -> bool:
    """True when ``path`` is at, below, or (not the top level) above a value a YAML problem replaced."""
    for q in poisoned:
        if path[: len(q)] == q or (path and q[: len(path)] == path):
            return True
    return False


def _meant(err: ValidationError, data: Any) -> dict[Path, Path]:
    """Unknown keys that only look like a known field the mapping lacks: ``{key path: field path}``.

    ``x`` written with a Cyrillic ``х``, or ``title`` with a zero-width
    space: the mistake is reported once, at the unknown key (with the code
    points and "did you mean"), not a second time as a missing field or a
    missing form.  (A misspelling such as ``titel`` is only a guess, and its
    missing field is still reported.)
    """
    out: dict[Path, Path] = {}
    for e in err.errors():
        path = _clean(e["loc"])
        if e["type"] != "extra_forbidden" or not path:
            continue
        known = _FIELD_NAMES["heads" if "heads" in path else ""]
        suggestion = ascii_look_alike(str(path[-1]))
        if suggestion not in known or suggestion == path[-1]:
            continue
        parent: Any = data
        for part in path[:-1]:
            if isinstance(parent, dict):
                parent = parent.get(part)
            elif isinstance(parent, list) and isinstance(part, int) and part < len(parent):
                parent = parent[part]
            else:
                parent = None
        if not isinstance(parent, dict) or suggestion in parent:
            continue
        if len(path) == 1 and _other_form(suggestion, parent):
            continue  # 'wq' beside heads: not the fused form's w_q, which would make the file mix both forms
        out[path] = path[:-1] + (suggestion,)
    return out


_FUSED = {"num_heads", "w_q", "w_k", "w_v", "b_q", "b_k", "b_v"}


def _other_form(name: str, data: dict[str, Any]) -> bool:
    """True when top-level field ``name`` belongs to the other form than the one ``data`` uses."""
    if name in _FUSED:
        return "heads" in data
    return name == "heads" and any(k in data for k in _FUSED)


def _problems_from(err: ValidationError, doc: Document, meant: dict[Path, Path] | None = None) -> list[Problem]:
    problems = []
    standing_in = set((meant or {}).values())
    for e in err.errors():
        path = _clean(e["loc"])
        kind = e["type"]
        if doc.poisoned and _related(path, doc.poisoned):
            continue  # already reported by the YAML pass (a tag, a recursive alias, too deep)
        if kind == "missing" and path[:-1] in doc.merged:
            continue  # probably meant to come from the (reported) merge key
        if kind == "missing" and path in standing_in:
            continue  # an unknown key stands for it: reported there, with "did you mean"
        if kind == "tutor":
            problems.append(doc.problem(path, e["ctx"]["message"], e["ctx"].get("hint", "")))
        elif kind == "missing":
            problems.append(doc.problem(path, t("schema.required"), t("schema.required.hint")))
        elif kind == "extra_forbidden":
            problems.append(doc.problem(path, *unknown_field(str(path[-1]), _FIELD_NAMES["heads" if "heads" in path else ""]),
                                        key=True))
        elif kind == "too_short":
            problems.append(doc.problem(path, t("schema.empty_list"), t("schema.empty_list.hint", item=_expected_for(path + (0,)))))
        elif kind == "literal_error":
            problems.append(doc.problem(path, t("schema.expected", expected=t("expected.mask"), found=describe(e["input"]))))
        else:  # list_type, model_type, dict_type, ...
            problems.append(doc.problem(path, t("schema.expected", expected=_expected_for(path), found=describe(e["input"]))))
    return problems


def _suggest(key: str, known: set[str]) -> str | None:
    """The known field ``key`` probably stands for: its look-alike ASCII spelling, else the closest name."""
    looks = ascii_look_alike(key)
    if looks in known:
        return looks
    close = difflib.get_close_matches(looks, sorted(known), n=1, cutoff=0.6)
    return close[0] if close else None


def unknown_field(key: str, known: set[str] | list[str]) -> tuple[str, str]:
    """The message and hint for an unknown key: the closest known name, and the code points of any
    invisible or look-alike character in it (``'x\\u200b'``: U+200B ZERO WIDTH SPACE) that explain the error."""
    names = codepoints(key)
    close = _suggest(key, set(known))
    hint = t("schema.unknown.hint", suggestion=close) if close else t("schema.unknown.hint.none")
    message = t("schema.unknown.codepoints", name=shown(key), names=names) if names else t("schema.unknown")
    return message, hint


def _hint(key: str, **fields: Any) -> str:
    """The fix hint for message ``key`` (its ``.hint`` sentence), or ``""``."""
    try:
        return t(key + ".hint", **fields)
    except KeyError:
        return ""


# --- the valid part of an invalid file --------------------------------------


@functools.cache
def _adapter(cls: type[BaseModel], name: str) -> TypeAdapter[Any]:
    info = cls.model_fields[name]
    return TypeAdapter(Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation)


def _fields(cls: type[BaseModel], data: dict[str, Any], base: Path, bad: set[Path]) -> SimpleNamespace:
    """Each field of ``cls`` validated on its own: a valid value, its default when absent, else ``None`` (path in ``bad``)."""
    out = SimpleNamespace()
    for name, info in cls.model_fields.items():
        if name not in data:
            if info.is_required():
                bad.add(base + (name,))
            setattr(out, name, None if info.is_required() else info.get_default(call_default_factory=True))
            continue
        try:
            setattr(out, name, _adapter(cls, name).validate_python(data[name]))
        except ValidationError:
            setattr(out, name, None)
            bad.add(base + (name,))
    return out


def _partial(data: dict[str, Any]) -> tuple[SimpleNamespace, set[Path]]:
    """The fields of an invalid exercise that are valid, so the cross-field checks can run on them.

    A field that is invalid or missing is ``None`` and its path is in the
    returned set; a head of the per-head form is checked field by field too
    (an invalid head is ``None``).
    """
    bad: set[Path] = set()
    f = _fields(ExerciseFile, data, (), bad)
    raw = data.get("heads")
    if ("heads",) in bad and isinstance(raw, list) and raw:
        bad.discard(("heads",))
        heads: list[SimpleNamespace | None] = []
        for i, h in enumerate(raw):
            if isinstance(h, dict):
                heads.append(_fields(HeadBlock, h, ("heads", i), bad))
            else:
                heads.append(None)
                bad.add(("heads", i))
        f.heads = heads
    return f, bad


# --- forms, shapes and limits -----------------------------------------------


def _split(m: list[list[Fraction]], h: int, n: int) -> model.Matrix:
    """Columns ``h*n:(h+1)*n`` of ``m``."""
    return tuple(tuple(row[h * n:(h + 1) * n]) for row in m)


def _cols(m: list[list[Fraction]]) -> int:
    return len(m[0])


@dataclass
class _Claim:
    """One field's say on one size: ``value`` from its ``what`` (rows, columns, entries, a head's size)."""

    value: int | Fraction
    path: Path
    what: str
    rank: int  # ties go to the lowest rank: 0 the input (x, x_kv), 1 weights and heads, 2 biases and labels, 3 mask, w_o
    label: str = ""  # how it reads as evidence, when not "{what} of {field}"


def _and(parts: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


class _Sizes:
    """Every size of an exercise decided from the fields that agree on it, not from the first one read.

    Each field says what it implies (``w_k`` with 3 columns: d_k = 3); a size
    is the value most fields agree on, ties going to the input (``x``,
    ``x_kv``), then the weights, then the biases and labels, then the mask and
    ``w_o``, then the file order.  A field that disagrees is reported once, with the fields
    that agree named as the evidence, so one wrong field is one problem and
    the fields it disagrees with are not blamed for it.
    """

    def __init__(self, doc: Document):
        self.doc = doc
        self.one_head = False  # the per-head form with one head: heads[0].w_q reads w_q everywhere
        self.scale: dict[str, int] = {}  # fused widths are claimed per head (width / num_heads) and shown whole
        self.claims: dict[str, list[_Claim]] = {}
        self.decided: dict[str, int | None] = {}

    def claim(self, size: str, value: int | Fraction, path: Path, what: str, rank: int, label: str = "") -> None:
        """``path`` says ``size`` is ``value``; a field has one say per size (its first).

        An empty list says nothing (no size is 0): two empty label lists never outvote ``x``.
        """
        if value == 0:
            return
        claims = self.claims.setdefault(size, [])
        if all(c.path != path for c in claims):
            claims.append(_Claim(value, path, what, rank, label))

    def withdraw(self, size: str, path: Path) -> None:
        """Take back ``path``'s say on ``size`` and decide it again, when other fields say something."""
        claims = self.claims.get(size, [])
        if any(c.path != path for c in claims):
            self.claims[size] = [c for c in claims if c.path != path]
            self.decide(size)

    def per_head(self, size: str, width: int) -> int | Fraction:
        """What a width says of ``size``: itself, or for a fused width its share per head (not whole: it cannot win)."""
        scale = self.scale.get(size, 1)
        share = Fraction(width, scale)
        return int(share) if share.denominator == 1 else share

    def width(self, size: str) -> int | None:
        """The decided ``size`` as a field shows it: a fused width is num_heads times the per-head size."""
        value = self.decided.get(size)
        return None if value is None else value * self.scale.get(size, 1)

    def _order(self, c: _Claim) -> tuple[int, int, int]:
        line, col = self.doc.where(c.path)
        return (c.rank, line if line is not None else 1 << 30, col or 0)

    def decide(self, size: str) -> int | None:
        """The value most claims agree on (whole numbers only); ``None`` when nothing says."""
        claims = [c for c in self.claims.get(size, []) if isinstance(c.value, int)]
        if not claims:
            self.decided[size] = None
            return None
        votes = Counter(c.value for c in claims)
        best = max(votes.values())
        value = min((c for c in claims if votes[c.value] == best), key=self._order).value
        self.decided[size] = value  # type: ignore[assignment]
        return value  # type: ignore[return-value]

    def agree(self, size: str, value: int | None = None) -> list[_Claim]:
        value = self.decided.get(size) if value is None else value
        return sorted((c for c in self.claims.get(size, []) if c.value == value), key=self._order)

    def evidence(self, size: str, near: Path) -> str:
        """The fields that agree on ``size``, as read from the field at ``near``: ``columns of w_q and entries of b_q``."""
        groups: dict[str, list[str]] = {}  # "columns" -> ["w_q", "w_k"]: "columns of w_q and w_k"
        for c in self.agree(size):
            if c.path != near:
                groups.setdefault(c.label or c.what, []).append("" if c.label else _near(c.path, near, self.one_head))
        return ", ".join(what if names == [""] * len(names) else f"{what} of {_and(names)}" for what, names in groups.items())


def _near(path: Path, near: Path, one_head: bool = False) -> str:
    """``path`` as read from a field at ``near``: ``w_q`` in the same head (or when there is one), ``heads[0].w_q`` from another."""
    if path[:1] == ("heads",) and (path[:2] == near[:2] or one_head):
        return format_path(path[2:])
    return format_path(path)


class _Checker:
    """Cross-field checks; every problem is recorded, the first per chain stops that chain.

    ``bad`` holds the paths of fields already reported invalid (or missing):
    checks that need them are skipped, so one mistake is reported once.
    """

    def __init__(self, doc: Document, bad: set[Path]):
        self.doc, self.bad, self.problems = doc, bad, []

    def val(self, path: Path, value: Any) -> Any:
        """``value``, or ``None`` when the field at ``path`` is known to be invalid."""
        return None if path in self.bad else value

    def add(self, path: Path, key: str, **fields: Any) -> None:
        self.problems.append(self.doc.problem(path, t(key, **fields), _hint(key, **fields)))

    def ragged(self, path: Path, m: list[list[Any]] | None) -> None:
        """Report the first row whose length differs from row 1's; the matrix is then invalid."""
        if m is None or path in self.bad:
            return
        for r, row in enumerate(m[1:], start=1):
            if len(row) != len(m[0]):
                self.add(path + (r,), "shape.ragged", row=r + 1, found=len(row), expected=len(m[0]))
                self.bad.add(path)
                return

    def denominators(self, path: Path, values: list[Any] | None) -> None:
        """Report the first entry at which the common denominator of ``values`` (a matrix or a
        vector) passes :data:`MAX_DENOMINATOR`; the field is then invalid."""
        if values is None or path in self.bad:
            return
        rows = values if values and isinstance(values[0], list) else [values]
        common = 1
        for r, row in enumerate(rows):
            for col, q in enumerate(row):
                common = math.lcm(common, q.denominator)
                if common > MAX_DENOMINATOR:
                    at = path + ((r, col) if rows is values else (col,))
                    self.add(at, "limit.denominator", field=path[-1], digits=len(str(common)),
                             limit=MAX_DENOMINATOR_DIGITS)
                    self.bad.add(path)
                    return

    def limit(self, path: Path, what: str, found: int | None) -> None:
        if found is not None and found > LIMITS[what]:
            self.add(path, "limit", what=what, found=found, limit=LIMITS[what])


def _check(f: Any, doc: Document, bad: set[Path] | None = None) -> tuple[list[Problem], model.Exercise | None]:
    """Forms, shapes that must chain, and limits, on the fields of ``f`` that are valid.

    ``f`` is an :class:`ExerciseFile`, or the valid part of an invalid file
    (:func:`_partial`) with the invalid fields' paths in ``bad``.  The
    exercise is built only when every field is valid and nothing is found.
    """
    c = _Checker(doc, set(bad or ()))
    for name in ("x", "x_kv", "w_q", "w_k", "w_v", "w_o"):
        c.ragged((name,), getattr(f, name))
    if isinstance(f.mask, list):
        c.ragged(("mask",), f.mask)
    for i, h in enumerate(f.heads or []):
        for name in ("w_q", "w_k", "w_v"):
            if h is not None:
                c.ragged(("heads", i, name), getattr(h, name))
    for name in ("x", "x_kv", "w_q", "w_k", "w_v", "b_q", "b_k", "b_v", "w_o", "b_o"):
        c.denominators((name,), getattr(f, name))
    for i, h in enumerate(f.heads or []):
        for name in ("w_q", "w_k", "w_v", "b_q", "b_k", "b_v"):
            if h is not None:
                c.denominators(("heads", i, name), getattr(h, name))

    x = c.val(("x",), f.x)
    x_kv = c.val(("x_kv",), f.x_kv)
    cross = f.x_kv is not None or ("x_kv",) in c.bad
    LK, KV = ("L_k", "d_kv") if cross else ("L", "d_model")  # self-attention: the keys are the queries
    shown = {"L": "L", "L_k": "L_k", "d_model": "d_model", "d_kv": "d_kv", "wk": "num_heads·d_k", "wv": "num_heads·d_v",
             "d_k": "d_k", "d_v": "d_v", "d_out": "d_out"}
    s = _Sizes(doc)

    # --- the sequences and their labels
    if x is not None:
        s.claim("L", len(x), ("x",), "rows", 0)
        s.claim("d_model", _cols(x), ("x",), "columns", 0)
        c.limit(("x",), "L", len(x))
        c.limit(("x",), "d_model", _cols(x))
    if x_kv is not None:
        s.claim("L_k", len(x_kv), ("x_kv",), "rows", 0)
        s.claim("d_kv", _cols(x_kv), ("x_kv",), "columns", 0)
        c.limit(("x_kv",), "L_k", len(x_kv))
        c.limit(("x_kv",), "d_kv", _cols(x_kv))
    if f.tokens is not None:
        s.claim("L", len(f.tokens), ("tokens",), "entries", 2)
    if f.kv_tokens is not None and not cross:
        c.add(("kv_tokens",), "form.kv_tokens")
    elif f.kv_tokens is not None:
        s.claim("L_k", len(f.kv_tokens), ("kv_tokens",), "entries", 2)
    if f.key_padding is not None:
        s.claim(LK, len(f.key_padding), ("key_padding",), "entries", 2)
    mask = c.val(("mask",), f.mask)
    if isinstance(mask, list):
        s.claim("L", len(mask), ("mask",), "rows", 3)
        if mask:
            s.claim(LK, len(mask[0]), ("mask",), "columns", 3)

    # --- the form, and the weights each form has: (field, matrix, size of its rows, size of its columns)
    fused_fields = [n for n in ("w_q", "w_k", "w_v", "b_q", "b_k", "b_v") if getattr(f, n) is not None or (n,) in c.bad]
    heads_given = f.heads is not None or ("heads",) in c.bad
    num_heads_given = f.num_heads is not None or ("num_heads",) in c.bad
    weights: list[tuple[Path, list[list[Fraction]], str, str]] = []
    biases: list[tuple[Path, list[Fraction], str]] = []
    per_head = fused = False
    H = 0
    if heads_given and (fused_fields or f.heads is not None and f.num_heads is not None and f.num_heads != len(f.heads)):
        c.add(("heads",), "form.both")
    elif f.heads is not None:
        per_head, H = True, len(f.heads)
        s.one_head = H == 1
        for i, h in enumerate(f.heads):
            if h is None:
                continue
            p: Path = ("heads", i)
            for name, rows, cols in (("w_q", "d_model", "d_k"), ("w_k", KV, "d_k"), ("w_v", KV, "d_v")):
                m = c.val(p + (name,), getattr(h, name))
                if m is not None:
                    weights.append((p + (name,), m, rows, cols))
            for name, size in (("b_q", "d_k"), ("b_k", "d_k"), ("b_v", "d_v")):
                if getattr(h, name) is not None:
                    biases.append((p + (name,), getattr(h, name), size))
    elif f.num_heads is not None:
        H = f.num_heads
        for n in ("w_q", "w_k", "w_v"):
            if getattr(f, n) is None and (n,) not in c.bad:
                c.add((), "form.fused_missing", field=n)
        c.limit(("num_heads",), "heads", H)
        if H <= LIMITS["heads"]:
            fused = True
            for name, rows, cols in (("w_q", "d_model", "wk"), ("w_k", KV, "wk"), ("w_v", KV, "wv")):
                m = c.val((name,), getattr(f, name))
                if m is not None:
                    weights.append(((name,), m, rows, cols))
            for name, size in (("b_q", "wk"), ("b_k", "wk"), ("b_v", "wv")):
                if getattr(f, name) is not None:
                    biases.append(((name,), getattr(f, name), size))
            s.scale = {"wk": H, "wv": H}
    elif num_heads_given or heads_given:
        pass  # num_heads or heads is invalid (reported): the form cannot be told
    elif fused_fields:
        c.add((fused_fields[0],), "form.needs_fused", field=fused_fields[0])
    else:
        c.add((), "form.neither")
    if f.heads is not None:
        c.limit(("heads",), "heads", len(f.heads))

    # --- the input sizes: from x, x_kv, the labels, the mask and the rows of the weights
    for path, m, rows, _ in weights:
        s.claim(rows, len(m), path, "rows", 1)
    for size in ("L", "L_k", "d_model", "d_kv"):
        s.decide(size)
    for name, m, rows, cols in (("x", x, "L", "d_model"), ("x_kv", x_kv, "L_k", "d_kv")):
        if m is None:
            continue
        others_r = {cl.value for cl in s.claims.get(rows, []) if cl.path != (name,)}
        others_c = {cl.value for cl in s.claims.get(cols, []) if cl.path != (name,)}
        if len(m) != _cols(m) and others_r == {_cols(m)} and others_c == {len(m)}:  # every other field reads it transposed
            s.withdraw(rows, (name,))
            s.withdraw(cols, (name,))
        # a sequence outvoted on one of its sizes says nothing about the other (as a weight with wrong rows)
        elif s.decided[cols] != _cols(m) and s.decided[rows] == len(m):
            s.withdraw(rows, (name,))
        elif s.decided[rows] != len(m) and s.decided[cols] == _cols(m):
            s.withdraw(cols, (name,))

    # --- each weight's layout from its rows; then d_k and d_v from the weights laid out right and the biases
    layout: dict[Path, str] = {}
    for path, m, rows, cols in weights:
        want = s.decided[rows]
        if want is None or len(m) == want:
            layout[path] = "ok"
            s.claim(cols, s.per_head(cols, _cols(m)), path, "columns", 1)
        elif _cols(m) == want and len(m) != want:
            layout[path] = "transposed?"  # [d_k × d_model] for [d_model × d_k]: nn.Linear's layout
        else:
            layout[path] = "rows"  # its columns say nothing: its layout is not the one the format asks for
    for path, v, size in biases:
        s.claim(size, s.per_head(size, len(v)), path, "entries", 2)
    w_o = c.val(("w_o",), f.w_o)
    if w_o is not None and fused:
        s.claim("wv", s.per_head("wv", len(w_o)), ("w_o",), "rows", 3)
    elif w_o is not None and per_head and H:  # every head has the same d_v, so w_o has num_heads·d_v rows
        per = Fraction(len(w_o), H)
        s.claim("d_v", int(per) if per.denominator == 1 else per, ("w_o",), "rows", 3,
                label=t("shape.w_o_evidence", rows=len(w_o), heads=H) if H > 1 else "")
    for size in ("d_k", "d_v", "wk", "wv"):
        if not s.claims.get(size):  # only transposed weights say: their rows
            for path, m, _, cols in weights:
                if cols == size and layout[path] == "transposed?" and isinstance(s.per_head(size, len(m)), int):
                    s.claim(size, s.per_head(size, len(m)), path, "rows", 1)
        s.decide(size)
    for path, m, _, cols in weights:
        if layout[path] == "transposed?":  # its transpose must fit the others (and split into whole heads)
            fits = s.width(cols) == len(m) or s.width(cols) is None and isinstance(s.per_head(cols, len(m)), int)
            layout[path] = "transposed" if fits else "rows"
    if per_head:
        width_v = H * s.decided["d_v"] if s.decided["d_v"] is not None else None
    else:
        width_v = s.width("wv")

    # --- the output projection
    wo_layout = "ok"
    if w_o is not None:
        d_out_from = _cols(w_o)
        if width_v is not None and len(w_o) != width_v:
            # out_proj.weight of nn.Linear is [d_out × num_heads·d_v]: d_out as b_o says, else usually d_model
            pinned = {len(f.b_o)} if f.b_o is not None else {s.decided["d_model"]}
            if _cols(w_o) == width_v and len(w_o) in pinned:
                wo_layout, d_out_from = "transposed", len(w_o)
            else:
                wo_layout = "rows"
        s.claim("d_out", d_out_from, ("w_o",), "columns" if wo_layout != "transposed" else "rows", 1)
        c.limit(("w_o",), "d_out", d_out_from)
    if f.b_o is not None:
        if f.w_o is None and ("w_o",) not in c.bad:
            c.add(("b_o",), "form.b_o_alone")
        elif w_o is not None:
            s.claim("d_out", len(f.b_o), ("b_o",), "entries", 2)
    s.decide("d_out")

    # --- every field that disagrees with what the others agree on, once
    def disagrees(path: Path, found: int, what: str, size: str, name: str = "") -> None:
        evidence = s.evidence(size, path)
        name = name or shown[size]
        expected_what = f"{name} ({evidence})" if evidence else name
        key = {"rows": "shape.rows.dim", "columns": "shape.cols", "entries": "shape.len"}[what]
        c.add(path, key, field=path[-1], found=found, expected_what=expected_what, expected=s.width(size))

    for name, rows, cols in (("x", "L", "d_model"), ("x_kv", "L_k", "d_kv")):
        m = x if name == "x" else x_kv
        R, C = s.decided[rows], s.decided[cols]
        if m is not None and len(m) != R and _cols(m) != C and (len(m), _cols(m)) == (C, R):
            c.problems.append(doc.problem((name,), t("shape.transposed", field=name, rows=len(m), cols=_cols(m),
                                                     row_size=rows, col_size=cols), t("shape.transposed.x.hint")))
        elif m is not None and len(m) != R and _cols(m) != C and R is not None and C is not None:
            c.add((name,), "shape.both", field=name, rows=len(m), cols=_cols(m), row_size=rows, col_size=cols, R=R, C=C,
                  row_evidence=s.evidence(rows, (name,)), col_evidence=s.evidence(cols, (name,)))
        elif m is not None and len(m) != s.decided[rows]:
            disagrees((name,), len(m), "rows", rows)
        elif m is not None and _cols(m) != s.decided[cols]:
            outvoting = [w for w in weights if w[2] == cols and len(w[1]) == s.decided[cols]]
            if outvoting and all(_cols(w[1]) == _cols(m) for w in outvoting):  # or are they nn.Linear's [out, in]?
                c.problems.append(doc.problem((name,), t("shape.cols", field=name, found=_cols(m), expected=C,
                                                         expected_what=f"{cols} ({s.evidence(cols, (name,))})"),
                                              t("shape.cols.or_transposed.hint", field=name, expected=C,
                                                weights=_and([format_path(w[0][-1:]) for w in outvoting]))))
            else:
                disagrees((name,), _cols(m), "columns", cols)
    for name, size in (("tokens", "L"), ("kv_tokens", "L_k"), ("key_padding", LK)):
        v = getattr(f, name)
        if v is not None and (name != "kv_tokens" or cross) and len(v) != s.decided[size]:
            disagrees((name,), len(v), "entries", size, "L_k" if name == "key_padding" else "")
    L, L_k = s.decided["L"], s.decided[LK]
    if isinstance(mask, list) and L is not None and L_k is not None and (len(mask) != L or any(len(r) != L_k for r in mask)):
        c.add(("mask",), "shape.mask", found=f"[{len(mask)} × {len(mask[0]) if mask else 0}]", L=L, L_k=L_k)
    done: set[Path] = set()  # fields already reported with their head
    for i in range(H if per_head and H > 1 else 0):
        for size in ("d_k", "d_v"):  # a head that agrees with itself on another size: one report, at the head
            mine = [cl for cl in s.claims.get(size, []) if cl.path[:2] == ("heads", i)]
            others = [cl for cl in s.agree(size) if cl.path[:2] != ("heads", i)]
            values = {cl.value for cl in mine}
            if len(values) == 1 and s.decided[size] not in values and others:
                heads_agreeing = list(dict.fromkeys(f"head {cl.path[1]}" for cl in others if cl.path[0] == "heads"))
                c.add(("heads", i), "shape.head_dims", what=size, found=mine[0].value, expected=s.decided[size],
                      others=_and(heads_agreeing + [cl.label for cl in others if cl.path[0] != "heads"]))
                done.update(cl.path for cl in mine)
                break
    for path, m, rows, cols in weights:
        R, C = s.decided[rows], s.width(cols)
        if path in done:
            continue
        if layout[path] == "transposed":
            c.add(path, "shape.transposed", field=path[-1], rows=len(m), cols=_cols(m), row_size=shown[rows],
                  col_size=shown[cols])
        elif layout[path] == "rows" and C is not None and _cols(m) != C:
            c.add(path, "shape.both", field=path[-1], rows=len(m), cols=_cols(m), row_size=shown[rows],
                  col_size=shown[cols], R=R, C=C, row_evidence=s.evidence(rows, path), col_evidence=s.evidence(cols, path))
        elif layout[path] == "rows":
            source = next((cl for cl in s.agree(rows) if cl.path in (("x",), ("x_kv",))), None)
            if source is not None:
                c.add(path, "shape.rows", field=path[-1], found=len(m), other=source.path[0], expected=R, name=shown[rows])
            else:
                disagrees(path, len(m), "rows", rows)
        elif C is not None and _cols(m) != C:
            disagrees(path, _cols(m), "columns", cols)
    for path, v, size in biases:
        if path not in done and s.width(size) is not None and len(v) != s.width(size):
            disagrees(path, len(v), "entries", size)
    if per_head:
        for size in ("d_k", "d_v"):
            agreeing = s.agree(size)
            if agreeing and agreeing[0].value > LIMITS[size]:  # type: ignore[operator]
                c.limit(agreeing[0].path, size, agreeing[0].value)  # type: ignore[arg-type]
    if fused:
        for size, what in (("wk", "d_k"), ("wv", "d_v")):
            claims = s.claims.get(size, [])
            if s.decided.get(size) is not None:
                c.limit(("w_q",) if size == "wk" else ("w_v",), what, s.decided[size])
            elif claims:  # no field's width is a multiple of num_heads
                first = next((cl for cl in sorted(claims, key=s._order) if cl.path[0] in ("w_q", "w_k", "w_v")), claims[0])
                width = int(first.value * H)
                c.add(first.path, "shape.divisible", field=first.path[-1], found=width, heads=H)
    if w_o is not None and wo_layout == "transposed":
        c.add(("w_o",), "shape.transposed", field="w_o", rows=len(w_o), cols=_cols(w_o), row_size=shown["wv"],
              col_size="d_out")
    elif w_o is not None and wo_layout == "rows":
        c.add(("w_o",), "shape.w_o_rows", found=len(w_o), expected=width_v)
    if f.b_o is not None and w_o is not None and s.decided["d_out"] is not None and len(f.b_o) != s.decided["d_out"]:
        disagrees(("b_o",), len(f.b_o), "entries", "d_out")
    if f.w_o is None and ("w_o",) not in c.bad and width_v is not None:
        c.limit(("heads",) if per_head else ("w_v",), "d_out", width_v)

    if c.problems or c.bad or x is None or not (per_head or fused):
        return c.problems, None
    L, L_k = len(x), len(x_kv) if x_kv is not None else len(x)
    if per_head:
        heads = [model.Head(*(tuple(map(tuple, m)) for m in (h.w_q, h.w_k, h.w_v)),
                            *(tuple(b) if b is not None else None for b in (h.b_q, h.b_k, h.b_v))) for h in f.heads]
    else:
        d_k, d_v = _cols(f.w_q) // H, _cols(f.w_v) // H

        def bias(b: list[Fraction] | None, h: int, n: int) -> model.Vector | None:
            return tuple(b[h * n:(h + 1) * n]) if b is not None else None
        heads = [model.Head(_split(f.w_q, h, d_k), _split(f.w_k, h, d_k), _split(f.w_v, h, d_v),
                            bias(f.b_q, h, d_k), bias(f.b_k, h, d_k), bias(f.b_v, h, d_v)) for h in range(H)]
    mask_kind: model.MaskKind = "none"
    mask_m: model.BoolMatrix | None = None
    if f.mask == "causal":
        mask_kind, mask_m = "causal", model.causal(L, L_k)  # type: ignore[arg-type]
    elif isinstance(f.mask, list):
        mask_kind, mask_m = "matrix", tuple(tuple(r) for r in f.mask)
    ex = model.Exercise(
        id=f.id, title=f.title, description=f.description,
        x=tuple(map(tuple, x)), x_kv=tuple(map(tuple, x_kv)) if x_kv is not None else None,
        tokens=tuple(f.tokens) if f.tokens else None, kv_tokens=tuple(f.kv_tokens) if f.kv_tokens else None,
        heads=tuple(heads), w_o=tuple(map(tuple, w_o)) if w_o is not None else None,
        b_o=tuple(f.b_o) if f.b_o is not None else None, mask_kind=mask_kind, mask=mask_m,
        key_padding=tuple(f.key_padding) if f.key_padding is not None else None,
        fused=f.num_heads is not None and f.heads is None, tags=tuple(f.tags), difficulty=f.difficulty,
        source=doc.filename,
    )
    return [], ex


# --- public entry points ----------------------------------------------------


@dataclass(frozen=True)
class Validation:
    """Everything found in one exercise file: its problems, its warnings, and the exercise when there are no problems.

    Problems are in file order.  Warnings (a leading zero, ``010``) do not
    stop a file from loading.
    """

    file: str
    problems: tuple[Problem, ...]
    warnings: tuple[Problem, ...] = ()
    exercise: model.Exercise | None = None

    @property
    def ok(self) -> bool:
        """True when the file is a valid exercise (warnings allowed)."""
        return self.exercise is not None


def _in_file_order(problems: list[Problem]) -> tuple[Problem, ...]:
    unique = list(dict.fromkeys(problems))
    return tuple(sorted(unique, key=lambda p: (p.line is None, p.line or 0, p.column or 0)))


def validate_document(doc: Document) -> Validation:
    """Every problem of a parsed document at once: YAML, fields and entries, then shapes and limits.

    Shapes and limits are checked on the fields that are valid even when
    others are not, so one pass reports every mistake, each once.  A document
    without a value (a syntax error, a refused alias expansion) has only its
    YAML problems.
    """
    problems = list(doc.problems)
    warnings = tuple(doc.warnings)
    if doc.value is None:
        if not problems:
            problems.append(Problem(doc.filename, 1, 1, "", t("yaml.empty"), t("yaml.empty.hint")))
        return Validation(doc.filename, _in_file_order(problems), warnings)
    if not isinstance(doc.value, dict):
        problems.append(doc.problem((), t("yaml.top_level", found=describe(doc.value)), t("yaml.top_level.hint")))
        return Validation(doc.filename, _in_file_order(problems), warnings)
    if "exercise" in doc.value and "id" not in doc.value and "x" not in doc.value:  # a solution file, given by mistake
        problems.append(doc.problem(("exercise",), t("exercise.is_solution"), t("exercise.is_solution.hint", file=doc.filename),
                                    key=True))
        return Validation(doc.filename, _in_file_order(problems), warnings)
    try:
        f: Any = ExerciseFile.model_validate(doc.value)
        bad: set[Path] = set()
    except ValidationError as err:
        meant = _meant(err, doc.value)
        problems += _problems_from(err, doc, meant)
        f, bad = _partial(doc.value)
        bad |= set(meant.values())  # a field an unknown key stands for is reported there: no checks need it
    found, ex = _check(f, doc, bad)
    problems += found
    if problems:
        return Validation(doc.filename, _in_file_order(problems), warnings)
    return Validation(doc.filename, (), warnings, ex)


def validate_text(text: str, filename: str = "<text>") -> Validation:
    """:func:`validate_document` of YAML text; never raises for bad input."""
    return validate_document(parse_yaml(text, filename))


def validate_file(path: str, display: str | None = None) -> Validation:
    """Read and validate one file; never raises for bad input (an unreadable file is a problem)."""
    name = display or str(path)
    text, problems = read_text(path, display)
    if text is None:
        return Validation(name, tuple(problems))
    return validate_text(text, name)


def check_document(doc: Document) -> tuple[list[Problem], model.Exercise | None]:
    """All problems of a parsed document, and the exercise when there are none."""
    v = validate_document(doc)
    return list(v.problems), v.exercise


def parse_exercise(text: str, filename: str = "<text>") -> model.Exercise:
    """Parse exercise YAML text.  Raises :class:`ExerciseError` listing every problem."""
    problems, ex = check_document(parse_yaml(text, filename))
    if ex is None:
        raise ExerciseError(problems)
    return ex


def exercise_problems(path: str, display: str | None = None) -> tuple[list[Problem], model.Exercise | None]:
    """Read and check one file; never raises for bad input."""
    v = validate_file(path, display)
    return list(v.problems), v.exercise


def load_exercise(path: str, display: str | None = None) -> model.Exercise:
    """Load one exercise file.  Raises :class:`ExerciseError` listing every problem."""
    problems, ex = exercise_problems(path, display)
    if ex is None:
        raise ExerciseError(problems)
    return ex


def exercise_from_data(data: dict[str, Any], filename: str = "<data>") -> model.Exercise:
    """Build an exercise from already-loaded data (Python values); for programs and tests."""
    problems, ex = check_document(Document(filename, value=data))
    if ex is None:
        raise ExerciseError(problems)
    return ex
