"""The exercise file format (v1) as a pydantic schema: every field, and every entry read exactly.

The contract is ``docs/exercise-format.md``; :func:`json_schema` prints it
for editors (``attn-tutor schema``).  :class:`ExerciseFile` (``extra="forbid"``)
checks the fields and the type of each entry; the shapes that must chain,
the two forms and the limits are :mod:`.checks`'; :mod:`.load` runs both.

No entry is ever evaluated as code: numbers are read from their text by
regular expressions and :class:`fractions.Fraction` (:func:`parse_entry`),
and the values YAML 1.1 read otherwise (``yes``, ``1:20``, ``0x1F``) are
refused with a hint saying what they are now.
"""

from __future__ import annotations

import functools
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
    WithJsonSchema,
)
from pydantic_core import PydanticCustomError

from tutor.base.messages import EN, t
from tutor.exercise.yamlread import YNum, describe


def english(key: str) -> str:
    """The English of ``key``: the model's descriptions are fixed when this module is imported, whatever the
    language of the run then; :func:`json_schema` says them in the run's language (:func:`_described`)."""
    return EN[key]

MAX_ENTRY_CHARS = 40
MAX_EXPONENT = 20
MAX_MAGNITUDE = 10**6  # a hand calculation has no use for larger entries; tables stay readable
# The exact engine writes each matrix over one common denominator (tutor.exact.engine.QMat); bounding it keeps every
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
    "description": english("schema.field.number"),
}

Entry = Annotated[Fraction, PlainValidator(parse_entry), WithJsonSchema(_NUMBER_SCHEMA)]
Flag = Annotated[bool, PlainValidator(_parse_bool), WithJsonSchema({"type": "boolean"})]
Text = Annotated[str, PlainValidator(_parse_text), WithJsonSchema({"type": "string"})]
Slug = Annotated[str, PlainValidator(_parse_slug), WithJsonSchema({"type": "string", "pattern": "^[a-z0-9][a-z0-9-]*$", "maxLength": 64})]
PositiveInt = Annotated[int, PlainValidator(_parse_positive), WithJsonSchema({"type": "integer", "minimum": 1})]
Difficulty = Annotated[int, PlainValidator(_parse_difficulty), WithJsonSchema({"type": "integer", "minimum": 1, "maximum": 5})]
MatrixField = Annotated[list[Annotated[list[Entry], Field(min_length=1)]], Field(min_length=1)]
VectorField = Annotated[list[Entry], Field(min_length=1)]
MaskName = Literal["none", "causal", "causal_upper_left", "causal_lower_right"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class HeadBlock(_Strict):
    """One head in the per-head form (the schema's description: ``schema.head``)."""

    model_config = ConfigDict(json_schema_extra={"description": english("schema.head")})

    w_q: MatrixField = Field(description=english("schema.field.heads.w_q"))
    # required unless the exercise has kv_heads (format v2; :mod:`.v2` reports a head that lacks them)
    w_k: MatrixField | None = Field(None, description=english("schema.field.heads.w_k"))
    w_v: MatrixField | None = Field(None, description=english("schema.field.heads.w_v"))
    b_q: VectorField | None = Field(None, description=english("schema.field.heads.b_q"))
    b_k: VectorField | None = Field(None, description=english("schema.field.heads.b_k"))
    b_v: VectorField | None = Field(None, description=english("schema.field.heads.b_v"))


class KVHeadBlock(_Strict):
    """One K/V head of grouped-query attention, per-head form (format v2)."""

    model_config = ConfigDict(json_schema_extra={"description": english("schema.kv_head")})

    w_k: MatrixField = Field(description=english("schema.field.heads.w_k"))
    w_v: MatrixField = Field(description=english("schema.field.heads.w_v"))
    b_k: VectorField | None = Field(None, description=english("schema.field.heads.b_k"))
    b_v: VectorField | None = Field(None, description=english("schema.field.heads.b_v"))


class CacheBlock(_Strict):
    """The KV cache of one K/V head (format v2)."""

    model_config = ConfigDict(json_schema_extra={"description": english("schema.cache_entry")})

    k: MatrixField = Field(description=english("schema.field.cache.k"))
    v: MatrixField = Field(description=english("schema.field.cache.v"))


# --- issue 23: a sliding window (Mistral) with attention sinks (StreamingLLM) as a mask
class WindowMask(_Strict):
    """``mask: {sliding_window: W, sinks: S}`` (format v3): causal, query i sees keys j with i − W < j ≤ i,
    and the first S keys (the sinks) whenever j ≤ i."""

    model_config = ConfigDict(json_schema_extra={"description": english("schema.window")})

    sliding_window: PositiveInt = Field(description=english("schema.field.sliding_window"))
    sinks: PositiveInt | None = Field(None, description=english("schema.field.sinks"))


def _mask_tag(v: Any) -> str:
    if isinstance(v, str):
        return "#name"
    return "#window" if isinstance(v, dict | WindowMask) else "#matrix"


MaskField = Annotated[
    Annotated[MaskName, Tag("#name")] | Annotated[list[list[Flag]], Tag("#matrix")]
    | Annotated[WindowMask, Tag("#window")],
    Discriminator(_mask_tag),
]
class LatentHeadBlock(_Strict):
    """One query head's up-projections of multi-head latent attention (format v3, ``mla.heads``)."""

    model_config = ConfigDict(json_schema_extra={"description": english("schema.mla_head")})

    w_uk: MatrixField = Field(description=english("schema.field.mla.w_uk"))
    w_uv: MatrixField = Field(description=english("schema.field.mla.w_uv"))


class LatentBlock(_Strict):
    """Multi-head latent attention's K/V side (format v3, ``mla:``): the down-projection and each head's up-projections."""

    model_config = ConfigDict(json_schema_extra={"description": english("schema.mla")})

    d_c: PositiveInt | None = Field(None, description=english("schema.field.mla.d_c"))
    w_dkv: MatrixField = Field(description=english("schema.field.mla.w_dkv"))
    heads: Annotated[list[LatentHeadBlock], Field(min_length=1)] = Field(description=english("schema.field.mla.heads"))


BiasField = Annotated[
    Annotated[list[Annotated[list[Entry], Field(min_length=1)]], Tag("#matrix")]
    | Annotated[list[MatrixField], Tag("#heads")],
    Discriminator(lambda v: "#heads" if isinstance(v, list) and v and isinstance(v[0], list) and v[0]
                  and isinstance(v[0][0], list) else "#matrix"),
]


# --- format v3: RoPE (issue 23) --------------------------------------------
MAX_ROPE_BASE = 10**12  # 10000 in RoFormer and LLaMA 2, 500000 in LLaMA 3: a hand exercise needs no more


def _parse_rope_base(value: Any) -> int:
    try:
        n = _parse_int(value)
    except PydanticCustomError:
        if isinstance(value, YNum | float):  # 1e308, 10000.0: a number, but not written in digits (rope trial F10)
            raise _fail(t("expected.rope_base"), value, t("hint.rope_base.digits", limit=f"{MAX_ROPE_BASE:,}")) from None
        raise
    if not 2 <= n <= MAX_ROPE_BASE:
        raise _fail(t("expected.rope_base"), value, t("hint.rope_base", limit=f"{MAX_ROPE_BASE:,}"))
    return n


RopeBase = Annotated[int, PlainValidator(_parse_rope_base),
                     WithJsonSchema({"type": "integer", "minimum": 2, "maximum": MAX_ROPE_BASE})]


class RopeBlock(_Strict):
    """RoPE on each head's Q and K (format v3): ``rope: {base: 10000, pairing: interleaved}``."""

    model_config = ConfigDict(json_schema_extra={"description": english("schema.rope")})

    base: RopeBase = Field(10000, description=english("schema.field.rope.base"))
    pairing: Literal["interleaved", "half"] = Field("interleaved", description=english("schema.field.rope.pairing"))


class ExerciseWords(_Strict):
    """An exercise's title and description in another language (``translations: {zh: ...}``)."""

    title: Text = Field(description=english("schema.field.title"))
    description: Text = Field("", description=english("schema.field.description"))


class ExerciseFile(_Strict):
    """An attn-tutor exercise file, format v1 (the schema's description: ``schema.exercise``)."""

    model_config = ConfigDict(title="attn-tutor exercise (v1)", json_schema_extra={"description": english("schema.exercise")})

    id: Slug = Field(description=english("schema.field.id"))
    title: Text = Field(description=english("schema.field.title"))
    description: Text = Field("", description=english("schema.field.description"))
    translations: dict[Slug, ExerciseWords] = Field({}, description=english("schema.field.translations"))
    x: MatrixField = Field(description=english("schema.field.x"))
    tokens: list[Text] | None = Field(None, description=english("schema.field.tokens"))
    x_kv: MatrixField | None = Field(None, description=english("schema.field.x_kv"))
    kv_tokens: list[Text] | None = Field(None, description=english("schema.field.kv_tokens"))
    heads: Annotated[list[HeadBlock], Field(min_length=1)] | None = Field(None, description=english("schema.field.heads"))
    num_heads: PositiveInt | None = Field(None, description=english("schema.field.num_heads"))
    w_q: MatrixField | None = Field(None, description=english("schema.field.w_q"))
    w_k: MatrixField | None = Field(None, description=english("schema.field.w_k"))
    w_v: MatrixField | None = Field(None, description=english("schema.field.w_v"))
    b_q: VectorField | None = Field(None, description=english("schema.field.b_q"))
    b_k: VectorField | None = Field(None, description=english("schema.field.b_k"))
    b_v: VectorField | None = Field(None, description=english("schema.field.b_v"))
    w_o: MatrixField | None = Field(None, description=english("schema.field.w_o"))
    b_o: VectorField | None = Field(None, description=english("schema.field.b_o"))
    mask: MaskField | None = Field(None, description=english("schema.field.mask"))
    key_padding: list[Flag] | None = Field(None, description=english("schema.field.key_padding"))
    key_padding_mask: list[Flag] | None = Field(None, description=english("schema.field.key_padding_mask"))
    upstream: MatrixField | None = Field(None, description=english("schema.field.upstream"))
    tags: list[Text] = Field(default_factory=list)
    difficulty: Difficulty | None = Field(None, description=english("schema.field.difficulty"))
    # --- format v2 (docs/exercise-format.md, "v2"): grouped K/V heads, a KV cache, an additive bias
    num_kv_heads: PositiveInt | None = Field(None, description=english("schema.field.num_kv_heads"))
    kv_heads: Annotated[list[KVHeadBlock], Field(min_length=1)] | None = Field(None, description=english("schema.field.kv_heads"))
    cache: Annotated[list[CacheBlock], Field(min_length=1)] | None = Field(None, description=english("schema.field.cache"))
    past_tokens: list[Text] | None = Field(None, description=english("schema.field.past_tokens"))
    past_x: MatrixField | None = Field(None, description=english("schema.field.past_x"))
    attn_bias: BiasField | None = Field(None, description=english("schema.field.attn_bias"))
    alibi: Flag | None = Field(None, description=english("schema.field.alibi"))
    # --- format v3 (docs/exercise-format.md, "v3"): RoPE (issue 23)
    rope: RopeBlock | None = Field(None, description=english("schema.field.rope"))
    # --- format v3 (docs/exercise-format.md, "v3"): multi-head latent attention
    mla: LatentBlock | None = Field(None, description=english("schema.field.mla"))
    # --- format v3, issue 23: the pre-norm block (checked by .block)
    norm: Literal["rmsnorm", "layernorm"] | None = Field(None, description=english("schema.field.norm"))
    norm_eps: Entry | None = Field(None, description=english("schema.field.norm_eps"))
    residual: Flag | None = Field(None, description=english("schema.field.residual"))
    norm_placement: Literal["pre", "post"] | None = Field(None, description=english("schema.field.norm_placement"))


def _described(node: Any) -> Any:
    """``node`` (a JSON Schema, or a part of it) with every ``description`` in the language of the run: the
    model's descriptions are the English of ``schema.*`` keys, fixed when the module was imported."""
    if isinstance(node, list):
        return [_described(n) for n in node]
    if not isinstance(node, dict):
        return node
    keys = _description_keys()
    return {k: (t(keys[v]) if k == "description" and isinstance(v, str) and v in keys else _described(v))
            for k, v in node.items()}


@functools.cache
def _description_keys() -> dict[str, str]:
    """The English of every ``schema.*`` key, to its key."""
    from ..base.messages import EN

    return {text: key for key, text in EN.items() if key.startswith("schema.")}


def json_schema() -> dict[str, Any]:
    """The JSON Schema of the format, from the model the loader uses."""
    schema = _described(ExerciseFile.model_json_schema())
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema

