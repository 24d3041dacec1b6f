"""The exercise file format (v1): pydantic schema and the one loader.

The contract is ``docs/exercise-format.md``.  Loading goes in three passes,
each collecting *every* problem it finds, each with file, line, column and
field:

1. :func:`tutor.yamlread.parse_yaml` - YAML syntax and YAML traps;
2. :class:`ExerciseFile` (pydantic, ``extra="forbid"``) - fields and entry types;
3. :func:`_check` - the two forms, shapes that must chain, and the limits.

The result is a :class:`tutor.model.Exercise` with exact ``Fraction`` entries.
No entry is ever evaluated as code: numbers are read from their text by
regular expressions and :class:`fractions.Fraction`.
"""

from __future__ import annotations

import difflib
import math
import re
from fractions import Fraction
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PlainValidator,
    Tag,
    ValidationError,
    WithJsonSchema,
)
from pydantic_core import PydanticCustomError

from . import model
from .errors import ExerciseError, Problem
from .messages import t
from .yamlread import Document, Path, YNum, describe, parse_yaml, read_text

LIMITS = {"L": 16, "L_k": 16, "d_model": 32, "d_kv": 32, "d_k": 32, "d_v": 32, "d_out": 32, "heads": 8}
MAX_ENTRY_CHARS = 40
MAX_EXPONENT = 20

# --- entries ---------------------------------------------------------------

_DECIMAL = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE](?P<exp>[-+]?[0-9]+))?")
_FRACTION = re.compile(r"(?P<num>[-+]?[0-9]+)\s*/\s*(?P<den>[-+]?[0-9]+)")
_RADIX = re.compile(r"[-+]?0[oOxXbB][0-9a-fA-F_]+")
_SEXAGESIMAL = re.compile(r"[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?")
_NOT_FINITE = re.compile(r"[-+]?\.?(inf|infinity|nan)", re.IGNORECASE)
_YAML11_BOOL = {"yes", "no", "on", "off", "y", "n"}


def _fail(expected: str, found: Any, hint: str = "") -> PydanticCustomError:
    return PydanticCustomError("tutor", "{message}", {"message": t("schema.expected", expected=expected, found=describe(found)), "hint": hint})


def parse_entry(value: Any) -> Fraction:
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
    expected = t("expected.number")
    if isinstance(value, bool) or value is None or isinstance(value, (list, dict)):
        hint = t("hint.quote_fraction") if isinstance(value, dict) else ""
        raise _fail(expected, value, hint)
    if isinstance(value, Fraction):
        return value
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _fail(expected, value, t("hint.not_finite"))
        return Fraction(repr(value))
    if not isinstance(value, str):
        raise _fail(expected, value)
    text = value.strip()
    if len(text) > MAX_ENTRY_CHARS:
        raise _fail(expected, value, t("hint.too_long", limit=MAX_ENTRY_CHARS))
    if m := _DECIMAL.fullmatch(text):
        if m["exp"] is not None and abs(int(m["exp"])) > MAX_EXPONENT:
            raise _fail(expected, value, t("hint.exponent", limit=MAX_EXPONENT))
        return Fraction(text)
    if m := _FRACTION.fullmatch(text):
        if int(m["den"]) == 0:
            raise _fail(expected, value, t("hint.div_zero"))
        return Fraction(int(m["num"]), int(m["den"]))
    if text.lower() in _YAML11_BOOL:
        raise _fail(expected, value, t("hint.yaml11_bool", text=text))
    if _SEXAGESIMAL.fullmatch(text):
        raise _fail(expected, value, t("hint.base60"))
    if _RADIX.fullmatch(text):
        raise _fail(expected, value, t("hint.radix"))
    if _NOT_FINITE.fullmatch(text):
        raise _fail(expected, value, t("hint.not_finite"))
    raise _fail(expected, value)


def _parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    hint = t("hint.yaml11_flag", text=value) if isinstance(value, str) and value.lower() in _YAML11_BOOL else ""
    raise _fail(t("expected.boolean"), value, hint)


def _parse_text(value: Any) -> str:
    if isinstance(value, str):  # YNum too: a title may be "2024"
        return str(value)
    raise _fail(t("expected.text"), value)


def _parse_int(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, YNum) and re.fullmatch(r"[-+]?[0-9]+", value):
        return int(value)
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


def _expected_for(path: Path) -> str:
    names = [p for p in path if isinstance(p, str)]
    name = names[-1] if names else ""
    depth = len(path) - (max(i for i, p in enumerate(path) if isinstance(p, str)) + 1) if names else 0
    if name in _MATRIX_FIELDS:
        return t("expected.matrix") if depth == 0 else t("expected.row")
    if name == "heads" and depth == 1 or not path:
        return t("expected.mapping")
    return t("expected.list")


def _problems_from(err: ValidationError, doc: Document) -> list[Problem]:
    problems = []
    for e in err.errors():
        path: Path = tuple(p for p in e["loc"] if not (isinstance(p, str) and p.startswith("#")))
        kind = e["type"]
        if kind == "tutor":
            problems.append(doc.problem(path, e["ctx"]["message"], e["ctx"].get("hint", "")))
        elif kind == "missing":
            problems.append(doc.problem(path, t("schema.required")))
        elif kind == "extra_forbidden":
            level = "heads" if "heads" in path else ""
            close = difflib.get_close_matches(str(path[-1]), sorted(_FIELD_NAMES[level]), n=1, cutoff=0.6)
            hint = t("schema.unknown.hint", suggestion=close[0]) if close else t("schema.unknown.hint.none")
            problems.append(doc.problem(path, t("schema.unknown"), hint, key=True))
        elif kind == "too_short":
            problems.append(doc.problem(path, t("schema.empty", item=_expected_for(path + (0,)))))
        elif kind == "literal_error":
            problems.append(doc.problem(path, t("schema.expected", expected=t("expected.mask"), found=describe(e["input"]))))
        else:  # list_type, model_type, dict_type, ...
            problems.append(doc.problem(path, t("schema.expected", expected=_expected_for(path), found=describe(e["input"]))))
    return problems


# --- forms, shapes and limits -----------------------------------------------


def _split(m: list[list[Fraction]], h: int, n: int) -> model.Matrix:
    """Columns ``h*n:(h+1)*n`` of ``m``."""
    return tuple(tuple(row[h * n:(h + 1) * n]) for row in m)


def _cols(m: list[list[Fraction]]) -> int:
    return len(m[0])


class _Checker:
    """Cross-field checks; every problem is recorded, the first per chain stops that chain."""

    def __init__(self, f: ExerciseFile, doc: Document):
        self.f, self.doc, self.problems = f, doc, []

    def add(self, path: Path, key: str, **fields: Any) -> None:
        self.problems.append(self.doc.problem(path, t(key, **fields)))

    def ragged(self, path: Path, m: list[list[Any]] | None) -> bool:
        if m is None:
            return False
        for r, row in enumerate(m[1:], start=1):
            if len(row) != len(m[0]):
                self.add(path + (r,), "shape.ragged", row=r + 1, found=len(row), expected=len(m[0]))
                return True
        return False

    def limit(self, path: Path, what: str, found: int) -> None:
        if found > LIMITS[what]:
            self.add(path, "limit", what=what, found=found, limit=LIMITS[what])

    def rows(self, path: Path, m: list[list[Fraction]], expected: int, other: str, name: str) -> bool:
        if len(m) != expected:
            self.add(path, "shape.rows", field=path[-1], found=len(m), other=other, expected=expected, name=name)
            return False
        return True

    def length(self, path: Path, v: list[Any] | None, expected: int, what: str) -> None:
        if v is not None and len(v) != expected:
            self.add(path, "shape.len", field=path[-1], found=len(v), expected_what=what, expected=expected)


def _check(f: ExerciseFile, doc: Document) -> tuple[list[Problem], model.Exercise | None]:
    c = _Checker(f, doc)
    bad = any(
        [c.ragged((name,), getattr(f, name)) for name in ("x", "x_kv", "w_q", "w_k", "w_v", "w_o")]
        + [c.ragged((name,), f.mask) for name in ("mask",) if isinstance(f.mask, list)]
        + [c.ragged(("heads", i, name), getattr(h, name)) for i, h in enumerate(f.heads or []) for name in ("w_q", "w_k", "w_v")]
    )
    if bad:
        return c.problems, None

    L, d_model = len(f.x), _cols(f.x)
    kv = f.x_kv if f.x_kv is not None else f.x
    kv_name, kv_dim = ("x_kv", "d_kv") if f.x_kv is not None else ("x", "d_model")
    L_k, d_kv = len(kv), _cols(kv)
    c.limit(("x",), "L", L)
    c.limit(("x",), "d_model", d_model)
    if f.x_kv is not None:
        c.limit(("x_kv",), "L_k", L_k)
        c.limit(("x_kv",), "d_kv", d_kv)
    c.length(("tokens",), f.tokens, L, "L (rows of x)")
    if f.kv_tokens is not None and f.x_kv is None:
        c.add(("kv_tokens",), "form.kv_tokens")
    c.length(("kv_tokens",), f.kv_tokens, L_k, "L_k (rows of x_kv)")
    c.length(("key_padding",), f.key_padding, L_k, "L_k (keys)")
    if isinstance(f.mask, list) and (len(f.mask) != L or not f.mask or len(f.mask[0]) != L_k):
        c.add(("mask",), "shape.mask", found=f"[{len(f.mask)} × {len(f.mask[0]) if f.mask else 0}]", L=L, L_k=L_k)

    fused_fields = [n for n in ("w_q", "w_k", "w_v", "b_q", "b_k", "b_v") if getattr(f, n) is not None]
    heads: list[model.Head] = []
    if f.heads is not None and (fused_fields or f.num_heads is not None and f.num_heads != len(f.heads)):
        c.add(("heads",), "form.both")
    elif f.heads is not None:
        for i, h in enumerate(f.heads):
            p: Path = ("heads", i)
            ok = c.rows(p + ("w_q",), h.w_q, d_model, "x", "d_model")
            ok &= c.rows(p + ("w_k",), h.w_k, d_kv, kv_name, kv_dim)
            ok &= c.rows(p + ("w_v",), h.w_v, d_kv, kv_name, kv_dim)
            d_k, d_v = _cols(h.w_q), _cols(h.w_v)
            if _cols(h.w_k) != d_k:
                c.add(p + ("w_k",), "shape.cols", field="w_k", found=_cols(h.w_k), expected_what="d_k (columns of w_q)", expected=d_k)
                ok = False
            c.length(p + ("b_q",), h.b_q, d_k, "d_k")
            c.length(p + ("b_k",), h.b_k, d_k, "d_k")
            c.length(p + ("b_v",), h.b_v, d_v, "d_v")
            c.limit(p + ("w_q",), "d_k", d_k)
            c.limit(p + ("w_v",), "d_v", d_v)
            if heads and (d_k, d_v) != (heads[0].d_k, heads[0].d_v):
                what, found, exp = ("d_k", d_k, heads[0].d_k) if d_k != heads[0].d_k else ("d_v", d_v, heads[0].d_v)
                c.add(p, "shape.head_dims", what=what, found=found, expected=exp)
            if ok:
                heads.append(model.Head(*(tuple(map(tuple, m)) for m in (h.w_q, h.w_k, h.w_v)),
                                        *(tuple(b) if b is not None else None for b in (h.b_q, h.b_k, h.b_v))))
    elif f.num_heads is not None:
        H = f.num_heads
        missing = [n for n in ("w_q", "w_k", "w_v") if getattr(f, n) is None]
        for n in missing:
            c.add((), "form.fused_missing", field=n)
        c.limit(("num_heads",), "heads", H)
        if not missing and H <= LIMITS["heads"]:
            ok = c.rows(("w_q",), f.w_q, d_model, "x", "d_model")
            ok &= c.rows(("w_k",), f.w_k, d_kv, kv_name, kv_dim)
            ok &= c.rows(("w_v",), f.w_v, d_kv, kv_name, kv_dim)
            for n in ("w_q", "w_v"):
                if _cols(getattr(f, n)) % H:
                    c.add((n,), "shape.divisible", field=n, found=_cols(getattr(f, n)), heads=H)
                    ok = False
            if _cols(f.w_k) != _cols(f.w_q):
                c.add(("w_k",), "shape.cols", field="w_k", found=_cols(f.w_k), expected_what="the columns of w_q", expected=_cols(f.w_q))
                ok = False
            d_k, d_v = _cols(f.w_q) // H, _cols(f.w_v) // H
            c.length(("b_q",), f.b_q, H * d_k, "num_heads·d_k")
            c.length(("b_k",), f.b_k, H * d_k, "num_heads·d_k")
            c.length(("b_v",), f.b_v, H * d_v, "num_heads·d_v")
            c.limit(("w_q",), "d_k", d_k)
            c.limit(("w_v",), "d_v", d_v)
            if ok:
                def bias(b: list[Fraction] | None, h: int, n: int) -> model.Vector | None:
                    return tuple(b[h * n:(h + 1) * n]) if b is not None else None
                heads = [model.Head(_split(f.w_q, h, d_k), _split(f.w_k, h, d_k), _split(f.w_v, h, d_v),
                                    bias(f.b_q, h, d_k), bias(f.b_k, h, d_k), bias(f.b_v, h, d_v))
                         for h in range(H)]
    elif fused_fields:
        c.add((fused_fields[0],), "form.needs_fused", field=fused_fields[0])
    else:
        c.add((), "form.neither")
    if f.heads is not None:
        c.limit(("heads",), "heads", len(f.heads))

    complete = bool(heads) and len(heads) == (len(f.heads) if f.heads is not None else f.num_heads)
    if f.w_o is not None and complete:
        concat_width = sum(h.d_v for h in heads)
        if len(f.w_o) != concat_width:
            c.add(("w_o",), "shape.w_o_rows", found=len(f.w_o), expected=concat_width)
        c.limit(("w_o",), "d_out", _cols(f.w_o))
    if f.b_o is not None:
        if f.w_o is None:
            c.add(("b_o",), "form.b_o_alone")
        else:
            c.length(("b_o",), f.b_o, _cols(f.w_o), "d_out (columns of w_o)")
    if f.w_o is None and heads:
        c.limit(("heads",) if f.heads is not None else ("w_v",), "d_out", sum(h.d_v for h in heads))

    if c.problems:
        return c.problems, None
    mask_kind: model.MaskKind = "none"
    mask: model.BoolMatrix | None = None
    if f.mask == "causal":
        mask_kind, mask = "causal", model.causal(L, L_k)
    elif isinstance(f.mask, list):
        mask_kind, mask = "matrix", tuple(tuple(r) for r in f.mask)
    ex = model.Exercise(
        id=f.id, title=f.title, description=f.description,
        x=tuple(map(tuple, f.x)), x_kv=tuple(map(tuple, f.x_kv)) if f.x_kv is not None else None,
        tokens=tuple(f.tokens) if f.tokens else None, kv_tokens=tuple(f.kv_tokens) if f.kv_tokens else None,
        heads=tuple(heads), w_o=tuple(map(tuple, f.w_o)) if f.w_o is not None else None,
        b_o=tuple(f.b_o) if f.b_o is not None else None, mask_kind=mask_kind, mask=mask,
        key_padding=tuple(f.key_padding) if f.key_padding is not None else None,
        fused=f.num_heads is not None and f.heads is None, tags=tuple(f.tags), difficulty=f.difficulty,
        source=doc.filename,
    )
    return [], ex


# --- public entry points ----------------------------------------------------


def check_document(doc: Document) -> tuple[list[Problem], model.Exercise | None]:
    """All problems of a parsed document, and the exercise when there are none."""
    if doc.problems:
        return doc.problems, None
    if not isinstance(doc.value, dict):
        if doc.value is None:
            return [Problem(doc.filename, 1, 1, "", t("yaml.empty"), t("yaml.empty.hint"))], None
        return [doc.problem((), t("yaml.top_level", found=describe(doc.value)))], None
    try:
        f = ExerciseFile.model_validate(doc.value)
    except ValidationError as err:
        return _problems_from(err, doc), None
    return _check(f, doc)


def parse_exercise(text: str, filename: str = "<text>") -> model.Exercise:
    """Parse exercise YAML text.  Raises :class:`ExerciseError` listing every problem."""
    problems, ex = check_document(parse_yaml(text, filename))
    if ex is None:
        raise ExerciseError(problems)
    return ex


def exercise_problems(path: str, display: str | None = None) -> tuple[list[Problem], model.Exercise | None]:
    """Read and check one file; never raises for bad input."""
    text, problems = read_text(path, display)
    if text is None:
        return problems, None
    return check_document(parse_yaml(text, display or str(path)))


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
