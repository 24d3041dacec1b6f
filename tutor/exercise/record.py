"""The exercise record: the normalized, validated exercise the engines compute on.

Pure data: exact :class:`fractions.Fraction` entries, tuples, no I/O, no
numpy, no sympy, no pydantic.  The loader (:mod:`.load`) builds it from a
file in either the per-head or the fused form; engines and renderers only
ever see this shape.

Convention (as in hand calculation): row vectors; a token is a row of ``x``
and a projection is ``x @ W`` with ``W`` of shape ``[d_in, d_out]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Literal

from tutor.base.messages import language
from tutor.base.textsafe import shown

Vector = tuple[Fraction, ...]
Matrix = tuple[Vector, ...]
BoolMatrix = tuple[tuple[bool, ...], ...]
MaskKind = Literal["none", "causal", "causal_lower_right", "matrix", "sliding_window"]
Pairing = Literal["interleaved", "half"]


def shape(m: Matrix) -> tuple[int, int]:
    """``(rows, cols)`` of a non-empty rectangular matrix."""
    return (len(m), len(m[0]) if m else 0)


def transpose(m: Matrix) -> Matrix:
    """``m^T``: ``[r, c] -> [c, r]``."""
    return tuple(zip(*m))


@dataclass(frozen=True)
class Head:
    """One attention head's projections (math convention, ``x @ W + b``).

    Shapes: ``w_q``, ``w_k`` ``[d_in, d_k]``; ``w_v`` ``[d_in, d_v]``;
    biases ``[d_k]``/``[d_v]`` or ``None``.  ``d_in`` is ``d_model`` for
    ``w_q`` and ``d_kv`` (the width of ``x_kv``) for ``w_k``/``w_v``.
    """

    w_q: Matrix
    w_k: Matrix
    w_v: Matrix
    b_q: Vector | None = None
    b_k: Vector | None = None
    b_v: Vector | None = None

    @property
    def d_k(self) -> int:
        return len(self.w_q[0])

    @property
    def d_v(self) -> int:
        return len(self.w_v[0])


@dataclass(frozen=True)
class KVHead:
    """One K/V head of grouped-query attention (format v2): ``w_k [d_kv, d_k]``, ``w_v [d_kv, d_v]``, biases or ``None``."""

    w_k: Matrix
    w_v: Matrix
    b_k: Vector | None = None
    b_v: Vector | None = None


@dataclass(frozen=True)
class CacheEntry:
    """The KV cache of one K/V head (format v2): ``k [L_past, d_k]``, ``v [L_past, d_v]``, already projected."""

    k: Matrix
    v: Matrix


@dataclass(frozen=True)
class Rope:
    """RoPE (format v3, Su et al. 2021, "RoFormer", §3.4.2): pair ``i`` of a head's Q and K turns by ``m·θ_i``,
    ``θ_i = base^(−2i/d_k)``, at position ``m``.  ``pairing``: ``interleaved`` pairs dimensions ``(2i, 2i+1)``
    (RoFormer, GPT-J); ``half`` pairs ``(i, i + d_k/2)`` (``rotate_half``: GPT-NeoX, LLaMA)."""

    base: int = 10000
    pairing: Pairing = "interleaved"

    def thetas(self, d_k: int) -> tuple[Fraction, ...] | None:
        """``(θ_0, …, θ_{d_k/2 − 1})`` exactly, ``θ_i = base^(−2i/d_k)``; ``None`` when one is irrational
        (``base^(2/d_k)`` is not a whole number: base 10000 keeps d_k = 2, 4 and 8 rational) or ``d_k`` is odd."""
        return rope_thetas(self.base, d_k)

    def pairs(self, d_k: int) -> tuple[tuple[int, int], ...]:
        """The dimension pairs ``(a, b)`` of pair ``i = 0 … d_k/2 − 1``: ``(2i, 2i+1)`` or ``(i, i + d_k/2)``."""
        return rope_pairs(self.pairing, d_k)


def rope_pairs(pairing: str, d_k: int) -> tuple[tuple[int, int], ...]:
    """The dimension pairs of RoPE for ``pairing`` (``interleaved`` or ``half``) and an even ``d_k``."""
    half = d_k // 2
    return tuple((2 * i, 2 * i + 1) if pairing == "interleaved" else (i, i + half) for i in range(half))


def rope_thetas(base: int, d_k: int) -> tuple[Fraction, ...] | None:
    """``θ_i = base^(−2i/d_k)`` for ``i = 0 … d_k/2 − 1``, exactly, or ``None`` when ``d_k`` is odd or
    ``base^(2/d_k)`` is irrational (an integer's rational root is an integer: found by rounding and checked)."""
    if d_k % 2 or base < 1:
        return None
    n = d_k // 2
    r = round(base ** (1 / n))
    root = next((c for c in (r - 1, r, r + 1) if c >= 1 and c**n == base), None)
    if root is None:
        return None
    return tuple(Fraction(1, root**i) for i in range(n))


@dataclass(frozen=True)
class Latent:
    """Multi-head latent attention's K/V side (format v3, ``mla:``; DeepSeek-AI 2024, "DeepSeek-V2", §2.1.2).

    Shapes: ``w_dkv [d_kv, d_c]`` (the down-projection to the latent ``c_KV = X_kv·W_DKV``, the one thing
    a KV cache keeps per token); per query head ``w_uk [d_c, d_k]`` and ``w_uv [d_c, d_v]`` (the
    up-projections ``K_h = c_KV·W_UK_h``, ``V_h = c_KV·W_UV_h``).  No biases (the paper's projections have
    none).  Each :class:`Head` of the exercise holds the products ``W_DKV·W_UK_h`` and ``W_DKV·W_UV_h`` as its
    ``w_k``, ``w_v``: the same K and V, exactly, for the code that knows no latent.
    """

    w_dkv: Matrix
    w_uk: tuple[Matrix, ...]
    w_uv: tuple[Matrix, ...]

    @property
    def d_c(self) -> int:
        return len(self.w_dkv[0])


@dataclass(frozen=True)
class Exercise:
    """A validated exercise.

    Shapes: ``x`` ``[L, d_model]``; ``x_kv`` ``[L_k, d_kv]`` or ``None``
    (self-attention: K and V come from ``x``); ``w_o`` ``[num_heads*d_v, d_out]``
    or ``None``; ``b_o`` ``[d_out]``; ``mask`` ``[L, L_k]`` (True = the query
    row may attend to that key column) or ``None``; ``key_padding`` ``[L_k]``
    (True = a real key, False = padding) or ``None``, whichever field of the
    file gave it (``key_padding``, or ``key_padding_mask`` in PyTorch's
    polarity: :attr:`key_padding_mask`).
    """

    id: str
    title: str
    x: Matrix
    heads: tuple[Head, ...]
    description: str = ""
    x_kv: Matrix | None = None
    tokens: tuple[str, ...] | None = None
    kv_tokens: tuple[str, ...] | None = None
    w_o: Matrix | None = None
    b_o: Vector | None = None
    mask_kind: MaskKind = "none"
    mask: BoolMatrix | None = None
    key_padding: tuple[bool, ...] | None = None
    upstream: Matrix | None = None  # [L, d_out]: ∂L/∂output for the backward pass (None: all ones)
    fused: bool = False
    tags: tuple[str, ...] = ()
    difficulty: int | None = None
    source: str = field(default="", compare=False)  # file path or "bundled:ID"
    # --- format v2 (grouped K/V heads, a KV cache, an additive bias); defaults keep a v1 exercise as it was
    kv_heads: tuple[KVHead, ...] | None = None  # G entries when K/V heads are grouped (G < num_heads), else None
    cache: tuple[CacheEntry, ...] | None = None  # one entry per K/V head (G, or num_heads): a decode step
    past_tokens: tuple[str, ...] | None = None
    past_x: Matrix | None = None  # [L_past, d_model]: the cached tokens' inputs, when given (the cache is checked against them)
    bias: tuple[Matrix, ...] | None = None  # per query head, [L, L_k], added to the scaled scores
    alibi: bool = False  # the bias is ALiBi's (its slopes: alibi_exponents, times j - i)
    # --- issue 23: mask_kind "sliding_window": the window W (Mistral) and the attention sinks S (StreamingLLM)
    window: int | None = None
    sinks: int = 0
    # --- format v3: RoPE on each head's Q and K (issue 23); None: no rotation
    rope: Rope | None = None
    mla: Latent | None = None  # format v3: K and V up-projected from a shared latent (multi-head latent attention)
    # --- issue 23, the pre-norm block (format v3): X normalized per row before the projections, and the residual
    norm: Literal["rmsnorm", "layernorm"] | None = None  # no learned scale or shift
    norm_eps: Fraction = Fraction(0)  # added to the mean square (RMSNorm) or the variance (LayerNorm)
    residual: bool = False  # the block's output: X + the layer's output (d_out = d_model)
    norm_placement: Literal["pre", "post"] = "pre"  # post: X + output normalized (the out_norm step; see .block)
    # the title and description in other languages: (language, title, description), from the file's translations
    translations: tuple[tuple[str, str, str], ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        """Text from the file, as it is shown: control and bidi characters escaped (:func:`tutor.base.textsafe.shown`).

        Every renderer and format (terminal, JSON, Markdown, HTML, the labels
        of every step) shows these fields, so they are made safe once, here:
        a title or token label can neither drive the terminal (set its title,
        clear the screen, print a link) nor reorder the text after it.  The
        description keeps its newlines and tabs (it is Markdown); a title, a
        label, a tag or the file name is one line.
        """
        for name in ("title", "source"):
            object.__setattr__(self, name, shown(getattr(self, name)))
        object.__setattr__(self, "description", shown(self.description, keep="\n\t"))
        object.__setattr__(self, "translations", tuple((lang, shown(title), shown(text, keep="\n\t"))
                                                      for lang, title, text in self.translations))
        for name in ("tokens", "kv_tokens", "tags", "past_tokens"):
            labels = getattr(self, name)
            if labels is not None:
                object.__setattr__(self, name, tuple(shown(label) for label in labels))

    # sizes, named once ------------------------------------------------------

    @property
    def local_title(self) -> str:
        """The title in the language of the run (the file's ``translations``), else as written."""
        return next((title for lang, title, _ in self.translations if lang == language() and title.strip()), self.title)

    @property
    def local_description(self) -> str:
        """The description in the language of the run (the file's ``translations``), else as written."""
        return next((text for lang, _, text in self.translations if lang == language() and text.strip()),
                    self.description)
    @property
    def L(self) -> int:
        return len(self.x)

    @property
    def d_model(self) -> int:
        return len(self.x[0])

    @property
    def kv(self) -> Matrix:
        """The sequence K and V are projected from: ``x_kv`` or ``x``."""
        return self.x_kv if self.x_kv is not None else self.x

    @property
    def L_past(self) -> int:
        """The number of cached tokens (0 without a cache)."""
        return len(self.cache[0].k) if self.cache else 0

    @property
    def L_k(self) -> int:
        """The number of keys: the cached ones, then the rows of ``x_kv`` (or ``x``)."""
        return self.L_past + len(self.kv)

    @property
    def num_kv_heads(self) -> int:
        """G, the number of K/V heads (``num_heads`` unless they are grouped)."""
        return len(self.kv_heads) if self.kv_heads is not None else self.num_heads

    def kv_head(self, head: int) -> int:
        """The K/V head query head ``head`` reads: ``head // (num_heads / num_kv_heads)`` (repeat_interleave order,
        as ``torch.nn.functional.scaled_dot_product_attention(..., enable_gqa=True)``)."""
        return head // (self.num_heads // self.num_kv_heads)

    def sharing(self, kv_head: int) -> tuple[int, ...]:
        """The query heads (0-based) that read K/V head ``kv_head``."""
        return tuple(h for h in range(self.num_heads) if self.kv_head(h) == kv_head)

    @property
    def grouped(self) -> bool:
        """True when K/V heads are shared by several query heads (GQA, MQA)."""
        return self.num_kv_heads < self.num_heads

    @property
    def has_cache(self) -> bool:
        return self.cache is not None

    @property
    def has_bias(self) -> bool:
        """True when an additive bias (``attn_bias`` or ALiBi) applies: the ``biased`` step exists."""
        return self.bias is not None

    @property
    def is_v2(self) -> bool:
        """True when the exercise uses a v2 feature the batched v1 layer does not run (grouped K/V, cache, bias)."""
        return self.grouped or self.has_cache or self.has_bias

    @property
    def num_heads(self) -> int:
        return len(self.heads)

    @property
    def has_norm(self) -> bool:
        """True when X is normalized before the projections (``norm``, pre-norm: the ``x_norm`` step exists)."""
        return self.norm is not None and self.norm_placement == "pre"

    @property
    def post_norm(self) -> bool:
        """True when ``X + output`` is normalized (``norm_placement: post``, Vaswani et al. 2017: the
        ``out_norm`` step exists after ``residual``; the projections read X itself)."""
        return self.norm is not None and self.norm_placement == "post"

    @property
    def d_out(self) -> int:
        if self.w_o is not None:
            return len(self.w_o[0])
        return sum(h.d_v for h in self.heads)

    @property
    def is_cross(self) -> bool:
        return self.x_kv is not None

    @property
    def has_mask(self) -> bool:
        """True when a mask or key padding applies (the ``masked`` step exists)."""
        return self.mask is not None or self.key_padding is not None

    @property
    def family(self) -> str:
        """The exercise family a skill is scheduled in (:mod:`tutor.store.scheduling`): the one
        feature that changes the hand calculation most, in this order of precedence --
        ``cross`` (K and V from another sequence: L_q ≠ L_k), ``masked`` (a mask or key
        padding: ``-inf`` scores, zero weights), ``multi-head`` (several heads, concatenated),
        else ``single-head``.  Decided by the exercise's structure, never by its free tags."""
        if self.is_cross:
            return "cross"
        if self.has_mask:
            return "masked"
        return "multi-head" if self.num_heads > 1 else "single-head"

    @property
    def key_padding_mask(self) -> tuple[bool, ...] | None:
        """``[L_k]``, PyTorch's polarity: True = a padding key (``nn.MultiheadAttention``'s ``key_padding_mask``)."""
        return None if self.key_padding is None else tuple(not real for real in self.key_padding)

    @property
    def query_labels(self) -> tuple[str, ...]:
        return self.tokens or tuple(f"t{i + 1}" for i in range(self.L))

    @property
    def past_labels(self) -> tuple[str, ...]:
        """Labels of the cached tokens: ``past_tokens``, else ``p1``, ``p2``, … (empty without a cache)."""
        return self.past_tokens or tuple(f"p{j + 1}" for j in range(self.L_past))

    @property
    def new_key_labels(self) -> tuple[str, ...]:
        """Labels of the keys projected in this step (the rows of ``x_kv``, or of ``x``)."""
        if self.x_kv is None:
            return self.query_labels
        return self.kv_tokens or tuple(f"s{j + 1}" for j in range(len(self.kv)))

    @property
    def key_labels(self) -> tuple[str, ...]:
        return self.past_labels + self.new_key_labels

    @property
    def query_positions(self) -> tuple[int, ...]:
        """The position of each query, from 0: after a KV cache the new tokens continue from ``L_past``."""
        return tuple(range(self.L_past, self.L_past + self.L))

    @property
    def key_positions(self) -> tuple[int, ...]:
        """The position of each key, from 0: the cached ones, then the new ones."""
        return tuple(range(self.L_k))

    def allowed(self) -> BoolMatrix | None:
        """``[L, L_k]`` booleans, True = may attend: ``mask AND key_padding``.

        ``None`` when neither a mask nor key padding applies.
        """
        if not self.has_mask:
            return None
        rows = []
        for i in range(self.L):
            rows.append(
                tuple(
                    (self.mask is None or self.mask[i][j])
                    and (self.key_padding is None or self.key_padding[j])
                    for j in range(self.L_k)
                )
            )
        return tuple(rows)


def unrolled(ex: Exercise) -> Exercise | None:
    """The full forward a decode step stands for: the same layer over every token (``past_x``, then ``x``),
    without a cache; ``None`` when ``ex`` gives no ``past_x``, or when its mask or bias says nothing of the
    earlier tokens' own rows (a mask matrix, an ``attn_bias``, a top-left causal mask).

    ``causal_lower_right`` becomes the square ``causal`` mask, a sliding window the square window over every
    position, and ALiBi is counted over every position, so
    the last ``L`` rows of the result are the decode step's rows when the cache holds the earlier tokens'
    projections (:func:`tutor.exercise.v2.derived` checks it).
    """
    if ex.past_x is None or ex.cache is None or ex.mask_kind not in ("none", "causal_lower_right", "sliding_window") \
            or (ex.bias is not None and not ex.alibi):
        return None
    L_k = ex.L_k
    full: BoolMatrix | None = None
    if ex.mask_kind == "causal_lower_right":
        full = causal(L_k, L_k)
    elif ex.mask_kind == "sliding_window":
        assert ex.window is not None
        full = sliding_window(L_k, L_k, ex.window, ex.sinks)  # positions count from the first cached token
    return replace(
        ex, id=f"{ex.id}-unrolled", description="", x=ex.past_x + ex.x, tokens=ex.past_labels + ex.query_labels,
        cache=None, past_tokens=None, past_x=None, upstream=None,
        mask_kind="causal" if ex.mask_kind == "causal_lower_right" else ex.mask_kind,
        mask=full,
        bias=tuple(alibi_bias(h, ex.num_heads, L_k, L_k) for h in range(ex.num_heads)) if ex.alibi else None)


def causal_lower_right(L_q: int, L_k: int) -> BoolMatrix:
    """Bottom-right aligned causal mask ``[L_q, L_k]``: key ``j`` visible to query ``i`` iff ``j <= i + L_k - L_q``.

    Same alignment as PyTorch's ``torch.nn.attention.bias.causal_lower_right(L_q, L_k)``: the last query sees
    every key (a decode step with a KV cache).  With ``L_q > L_k`` the first rows see no key.
    """
    return tuple(tuple(j <= i + L_k - L_q for j in range(L_k)) for i in range(L_q))


def alibi_exponents(num_heads: int) -> tuple[Fraction, ...]:
    """``e_h`` for each head (0-based) of ``num_heads``, ALiBi's slope of head ``h`` being ``2^(-e_h)``.

    Press et al. 2022, §3 and the reference code's ``get_slopes`` (ofirpress/attention_with_linear_biases):
    for ``n`` a power of two the geometric sequence ``2^(-8i/n)``, ``i = 1 … n``; otherwise the ``2^k``
    slopes of the largest power of two ``2^k < n``, followed by every other slope of ``2^(k+1)`` heads
    (``[0::2]``: ``i = 1, 3, 5 …``) for the remaining ``n − 2^k`` heads.  3 heads: ``4, 8, 2``
    (slopes 1/16, 1/256, 1/4).  Raises ``ValueError`` for ``num_heads < 1``.
    """
    if num_heads < 1:
        raise ValueError(f"ALiBi needs at least one head, found {num_heads}")
    if num_heads & (num_heads - 1) == 0:
        return tuple(Fraction(8 * i, num_heads) for i in range(1, num_heads + 1))
    k = 1 << (num_heads.bit_length() - 1)  # the largest power of two below num_heads
    return alibi_exponents(k) + alibi_exponents(2 * k)[0::2][:num_heads - k]


def alibi_slope(head: int, num_heads: int) -> Fraction:
    """ALiBi's slope of ``head`` (0-based) of ``num_heads``, exactly: ``2^(-e)`` with ``e`` from :func:`alibi_exponents`.

    Rational for every ``num_heads`` up to 8 (the format's limit); raises ``ValueError`` when the exponent is
    not an integer (``num_heads`` of 9 or more, where some slopes are odd powers of ``2^(-1/2)``).
    """
    e = alibi_exponents(num_heads)[head]
    if e.denominator != 1:
        raise ValueError(f"ALiBi's slope 2^(-{e}) of head {head + 1} of {num_heads} is not rational")
    return Fraction(1, 2 ** int(e))


def alibi_bias(head: int, num_heads: int, L_q: int, L_k: int) -> Matrix:
    """``[L_q, L_k]``: ``slope · (j - i')`` with ``i' = i + L_k - L_q`` the query's position among the keys.

    The distance is counted in positions: with a KV cache the new token ``i`` sits at position
    ``L_past + i``, so it is ``j - (i + L_k - L_q)`` (0 on the query's own key, negative for earlier keys).
    """
    m = alibi_slope(head, num_heads)
    return tuple(tuple(m * (j - (i + L_k - L_q)) for j in range(L_k)) for i in range(L_q))


def causal(L_q: int, L_k: int) -> BoolMatrix:
    """Top-left aligned causal mask ``[L_q, L_k]``: key ``j`` visible to query ``i`` iff ``j <= i``.

    Same alignment as PyTorch's ``scaled_dot_product_attention(is_causal=True)``.
    """
    return tuple(tuple(j <= i for j in range(L_k)) for i in range(L_q))


# --- issue 23: the sliding window (Mistral) and attention sinks (StreamingLLM) -------------------------------


def sliding_window(L_q: int, L_k: int, window: int, sinks: int = 0) -> BoolMatrix:
    """``[L_q, L_k]`` booleans, True = may attend: causal, within ``window``, or one of the first ``sinks`` keys.

    Query ``i`` sits at position ``p = i + L_k − L_q`` among the keys (bottom-right aligned: with a KV cache
    the new tokens come after the cached ones); it sees key ``j`` iff ``j ≤ p`` and (``p − window < j`` or
    ``j < sinks``): itself and the ``window − 1`` keys before it (Mistral 7B, Jiang et al. 2023, §2, "Sliding
    Window Attention"), and the first ``sinks`` tokens (Xiao et al. 2023, StreamingLLM, §3.2: attention
    sinks kept beside a window of recent tokens).  Raises ``ValueError`` for ``window < 1`` or ``sinks < 0``.
    """
    if window < 1 or sinks < 0:
        raise ValueError(f"a sliding window needs window >= 1 and sinks >= 0, found window={window}, sinks={sinks}")
    offset = L_k - L_q
    return tuple(tuple(j <= i + offset and (i + offset - window < j or j < sinks) for j in range(L_k))
                 for i in range(L_q))


def window_slots(position: int, window: int, sinks: int = 0) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...]]:
    """The rolling buffer cache after position ``position`` is written: ``(sinks kept, (slot, position) pairs)``.

    Mistral's rolling buffer (Jiang et al. 2023, §2, "Rolling Buffer Cache") holds ``window`` slots; the
    keys and values of position ``p`` go to slot ``p mod window``, overwriting position ``p − window``, the
    first key that left the window, so the cache never grows past ``window`` entries (the pairs are in slot
    order).  With ``sinks`` the first ``sinks`` positions are kept beside it, never overwritten (StreamingLLM's
    cache of sinks and recent tokens); a sink still inside the window is in the window's slots too.
    Positions count from 0.
    """
    kept = tuple(range(min(sinks, position + 1)))
    recent = range(max(0, position - window + 1), position + 1)
    return kept, tuple(sorted((p % window, p) for p in recent))
