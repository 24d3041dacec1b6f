"""The production forward pass as shapes: what a shape drill or ``explain`` shows.

Pure: no arrays are made; the shapes are those :meth:`MultiHeadAttention.forward`
creates (a test checks every one).  Every note is a sentence of the message
catalogue (``trace.<step>``), so a translation or a JSON consumer reaches it
by key.

What the notes say about PyTorch is checked against torch 2.13 in
``tests/test_torch_claims.py``: where the ``1/√d_k`` scale is applied
(:func:`torch.nn.functional.scaled_dot_product_attention`'s math path
multiplies q and k by ``d_k^(-1/4)`` each; ``nn.MultiheadAttention`` with
``need_weights=True`` multiplies q by ``d_k^(-1/2)``), when merging the heads
copies (``transpose(1, 2).reshape(...)`` is a view unless ``H > 1``,
``L > 1`` and ``d_v > 1``, in NumPy and in torch).  An exercise's layer as
shapes, and its masks as PyTorch takes them, are :mod:`tutor.production`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..base.messages import Msg
from ._common import _shape_text


class _Shaped:
    """A shape written two ways, from ``dims`` (symbolic) and ``shape`` (numbers)."""

    dims: tuple[str, ...]
    shape: tuple[int, ...]

    @property
    def symbolic(self) -> str:
        """``"[B, L, 3·H·d_k]"``."""
        return "[" + ", ".join(self.dims) + "]"

    @property
    def concrete(self) -> str:
        """``"[4, 512, 1536]"``."""
        return _shape_text(self.shape)


@dataclass(frozen=True)
class TraceStep(_Shaped):
    """One step of a forward pass as shapes: what a shape drill or ``explain`` shows.

    ``name`` is the step (``"qkv"``, ``"view"``, ``"permute"``, ...);
    ``dims`` the symbolic shape (``("B", "L", "3·H·d_k")``); ``shape`` the
    same shape in numbers (``(4, 512, 1536)``); ``key`` and ``fields`` the
    catalogue sentence that says what produced it (:attr:`note`; ``count`` when it agrees with a number), naming the
    reshape/transpose in PyTorch spelling.
    """

    name: str
    dims: tuple[str, ...]
    shape: tuple[int, ...]
    key: str
    fields: tuple[tuple[str, object], ...] = ()
    count: int | None = None  # the key has plural forms, for this count

    @property
    def note(self) -> Msg:
        """What produced the step, to be put into words when shown: ``Msg(key, **fields)``
        (:meth:`Msg.plural` when the sentence agrees with :attr:`count`)."""
        if self.count is not None:
            return Msg.plural(self.key, self.count, **dict(self.fields))
        return Msg(self.key, **dict(self.fields))


def _dim_value(expr: str, sizes: dict[str, int]) -> int:
    """Evaluate a dimension like ``"3·H·d_k"`` (factors joined by ``·``) from ``sizes``."""
    n = 1
    for factor in expr.split("·"):
        n *= int(factor) if factor.isdigit() else sizes[factor]
    return n


class _TraceBuilder:
    def __init__(self, sizes: dict[str, int]):
        self.sizes = sizes
        self.steps: list[TraceStep] = []

    def add(self, name: str, dims: tuple[str, ...], key: str | None = None, **fields: object) -> None:
        shape = tuple(_dim_value(d, self.sizes) for d in dims)
        self.steps.append(TraceStep(name, dims, shape, key or f"trace.{name}", tuple(fields.items())))


def merge_copies(H: int, L: int, d_v: int) -> bool:
    """Whether ``context.transpose(1, 2).reshape(B, L, H·d_v)`` must copy (NumPy and torch alike).

    ``[B, H, L, d_v]`` transposed to ``[B, L, H, d_v]`` merges its last two
    axes in place only when one of ``H``, ``L``, ``d_v`` is 1 (an axis of
    size 1 has no stride to respect); otherwise ``reshape`` copies.  ``B``
    does not matter.  Checked against ``np.shares_memory`` and torch's
    ``data_ptr``/``_base`` for every size up to 3 (tests/test_torch_claims.py).
    """
    return H > 1 and L > 1 and d_v > 1


# --------------------------------------------------------------------------- #
# The production forward as named points, for any configuration (issue 14):
# grouped K/V heads (GQA/MQA), fused or separate projections, masks.  Sizes
# only: no layer and no arrays are needed, so the shape drill can ask about a
# layer of any size.  The names are the ones the drill asks about and its JSON
# carries; the tests check every shape against torch 2.13 on the meta device
# and against a plain NumPy forward.
# --------------------------------------------------------------------------- #

#: The points of :func:`production_trace` a question may name, in forward order.
POINTS = (
    "x", "q_proj", "k_proj", "v_proj", "q_heads", "k_heads", "v_heads", "k_repeated", "v_repeated",
    "key_padding_mask", "attn_mask", "scores", "weights", "head_outputs", "merged", "output",
)


@dataclass(frozen=True)
class AttentionConfig:
    """The sizes and options of one multi-head attention forward, in the field's names.

    ``B`` sequences of ``L_q`` queries over ``L_k`` keys; ``d_model`` the width
    of ``x`` (and of the output), ``d_kv`` the width of the sequence K and V
    come from (``x_kv`` in cross-attention; ``d_model`` in self-attention);
    ``num_heads`` query heads of width ``d_k``, ``num_kv_heads`` key/value
    heads (``num_heads``: multi-head, 1: multi-query, in between: grouped-query
    attention) of widths ``d_k`` and ``d_v``.  ``fused``: one projection for
    Q, K and V (self-attention only); ``causal``: a causal mask
    (self-attention only, top-left aligned, ``is_causal=True``);
    ``padding``: a ``key_padding_mask``.

    Raises ``ValueError`` for a configuration no layer has: sizes below 1,
    ``num_heads`` not a multiple of ``num_kv_heads``, self-attention with
    ``L_k != L_q`` or ``d_kv != d_model``, a fused projection or a causal mask
    in cross-attention.
    """

    B: int
    L_q: int
    L_k: int
    d_model: int
    num_heads: int
    num_kv_heads: int
    d_k: int
    d_v: int
    d_kv: int
    cross: bool = False
    fused: bool = False
    causal: bool = False
    padding: bool = False

    def __post_init__(self) -> None:
        sizes = {name: getattr(self, name) for name in ("B", "L_q", "L_k", "d_model", "num_heads", "num_kv_heads",
                                                       "d_k", "d_v", "d_kv")}
        small = [name for name, n in sizes.items() if not isinstance(n, int) or isinstance(n, bool) or n < 1]
        if small:
            raise ValueError(f"sizes must be whole numbers of at least 1: {', '.join(small)}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads = {self.num_heads} is not a multiple of num_kv_heads = {self.num_kv_heads}")
        if not self.cross and (self.L_k != self.L_q or self.d_kv != self.d_model):
            raise ValueError("self-attention has L_k = L_q and d_kv = d_model")
        if self.cross and (self.fused or self.causal):
            raise ValueError("a fused QKV projection and a causal mask are for self-attention only")

    @property
    def groups(self) -> int:
        """Query heads per key/value head: ``num_heads // num_kv_heads``."""
        return self.num_heads // self.num_kv_heads

    @property
    def masked(self) -> bool:
        """True when the forward has an ``attn_mask`` (causal, padding or both)."""
        return self.causal or self.padding

    def sizes(self) -> dict[str, int]:
        """The named sizes, ``{"B": 2, "L_q": 5, ...}``."""
        return {"B": self.B, "L_q": self.L_q, "L_k": self.L_k, "d_model": self.d_model, "d_kv": self.d_kv,
                "num_heads": self.num_heads, "num_kv_heads": self.num_kv_heads, "d_k": self.d_k, "d_v": self.d_v}


@dataclass(frozen=True)
class TracePoint(_Shaped):
    """A point of :func:`production_trace`: ``name``, symbolic ``dims`` and numeric ``shape`` as a
    :class:`TraceStep` has them, a ``note`` on what it is, the points it is computed from
    (``inputs``) and the PyTorch expression that computes it (``op``)."""

    name: str
    dims: tuple[str, ...]
    shape: tuple[int, ...]
    note: str
    inputs: tuple[str, ...]
    op: str


def production_trace(cfg: AttentionConfig) -> tuple[TracePoint, ...]:
    """The forward pass of ``cfg`` as named points with their shapes, in order.

    Sources: Vaswani et al. 2017, section 3.2.2 (projections, heads,
    concatenation, ``W^O``); Ainslie et al. 2023, "GQA" (``num_kv_heads``
    key/value heads, each shared by ``num_heads // num_kv_heads`` query heads:
    ``repeat_interleave`` along the head axis, the order of
    ``F.scaled_dot_product_attention(..., enable_gqa=True)``); the PyTorch docs
    of ``F.scaled_dot_product_attention`` (``attn_mask`` broadcast to
    ``[B, num_heads, L_q, L_k]``, True = may attend) and
    ``nn.MultiheadAttention`` (``key_padding_mask [B, L_k]``, True = padding).

    The points (see :data:`POINTS`): ``x [B, L_q, d_model]``; with
    ``cross``, ``x_kv [B, L_k, d_kv]``; with ``fused``, ``qkv``; ``q_proj
    [B, L_q, num_heads·d_k]``, ``k_proj [B, L_k, num_kv_heads·d_k]``,
    ``v_proj [B, L_k, num_kv_heads·d_v]``; ``q_heads [B, num_heads, L_q,
    d_k]``, ``k_heads``/``v_heads [B, num_kv_heads, L_k, d]``; with fewer
    K/V heads than query heads, ``k_repeated``/``v_repeated [B, num_heads,
    L_k, d]``; with padding, ``key_padding_mask [B, L_k]``; with a mask,
    ``attn_mask`` as passed to SDPA (``[L_q, L_k]`` causal, ``[B, 1, 1, L_k]``
    padding, ``[B, 1, L_q, L_k]`` both); ``scores`` and ``weights [B,
    num_heads, L_q, L_k]``; ``head_outputs [B, num_heads, L_q, d_v]``;
    ``merged [B, L_q, num_heads·d_v]``; ``output [B, L_q, d_model]``.
    """
    s = cfg.sizes()
    points: list[TracePoint] = []

    def add(name: str, dims: tuple[tuple[str, int], ...], inputs: tuple[str, ...], op: str, note: str) -> None:
        points.append(TracePoint(name, tuple(d for d, _ in dims), tuple(n for _, n in dims), note, inputs, op))

    def dim(name: str) -> tuple[str, int]:
        return name, s[name]

    H, H_kv, d_k, d_v = s["num_heads"], s["num_kv_heads"], s["d_k"], s["d_v"]
    hq = ("num_heads·d_k", H * d_k)
    hk = ("num_kv_heads·d_k", H_kv * d_k)
    hv = ("num_kv_heads·d_v", H_kv * d_v)
    add("x", (dim("B"), dim("L_q"), dim("d_model")), (), "x", "the input: B sequences of L_q tokens")
    kv = "x"
    if cfg.cross:
        add("x_kv", (dim("B"), dim("L_k"), dim("d_kv")), (), "x_kv", "the sequence K and V come from")
        kv = "x_kv"
    if cfg.fused:
        width = (("(num_heads + 2·num_kv_heads)·d_k", (H + 2 * H_kv) * d_k) if d_k == d_v else
                 ("(num_heads + num_kv_heads)·d_k + num_kv_heads·d_v", (H + H_kv) * d_k + H_kv * d_v))
        add("qkv", (dim("B"), dim("L_q"), width), ("x",), "qkv = W_qkv(x)",
            "one fused nn.Linear for Q, K and V")
        split = "q_proj, k_proj, v_proj = qkv.split([num_heads·d_k, num_kv_heads·d_k, num_kv_heads·d_v], dim=-1)"
        add("q_proj", (dim("B"), dim("L_q"), hq), ("qkv",), split, "the first part of the fused projection")
        add("k_proj", (dim("B"), dim("L_k"), hk), ("qkv",), split, "the second part of the fused projection")
        add("v_proj", (dim("B"), dim("L_k"), hv), ("qkv",), split, "the third part of the fused projection")
    else:
        add("q_proj", (dim("B"), dim("L_q"), hq), ("x",), "q_proj = W_Q(x)", "nn.Linear(d_model, num_heads·d_k)")
        add("k_proj", (dim("B"), dim("L_k"), hk), (kv,), f"k_proj = W_K({kv})", "nn.Linear(d_kv, num_kv_heads·d_k)")
        add("v_proj", (dim("B"), dim("L_k"), hv), (kv,), f"v_proj = W_V({kv})", "nn.Linear(d_kv, num_kv_heads·d_v)")
    add("q_heads", (dim("B"), dim("num_heads"), dim("L_q"), dim("d_k")), ("q_proj",),
        "q_heads = q_proj.view(B, L_q, num_heads, d_k).transpose(1, 2)", "split into heads, then heads before tokens")
    add("k_heads", (dim("B"), dim("num_kv_heads"), dim("L_k"), dim("d_k")), ("k_proj",),
        "k_heads = k_proj.view(B, L_k, num_kv_heads, d_k).transpose(1, 2)", "split into heads, then heads before tokens")
    add("v_heads", (dim("B"), dim("num_kv_heads"), dim("L_k"), dim("d_v")), ("v_proj",),
        "v_heads = v_proj.view(B, L_k, num_kv_heads, d_v).transpose(1, 2)", "split into heads, then heads before tokens")
    keys, values = "k_heads", "v_heads"
    if H_kv < H:
        add("k_repeated", (dim("B"), dim("num_heads"), dim("L_k"), dim("d_k")), ("k_heads",),
            "k_repeated = k_heads.repeat_interleave(num_heads // num_kv_heads, dim=1)",
            "each key head serves num_heads // num_kv_heads query heads")
        add("v_repeated", (dim("B"), dim("num_heads"), dim("L_k"), dim("d_v")), ("v_heads",),
            "v_repeated = v_heads.repeat_interleave(num_heads // num_kv_heads, dim=1)",
            "each value head serves num_heads // num_kv_heads query heads")
        keys, values = "k_repeated", "v_repeated"
    if cfg.padding:
        add("key_padding_mask", (dim("B"), dim("L_k")), (), "key_padding_mask",
            "True = padding (nn.MultiheadAttention's convention)")
    if cfg.masked:
        one = ("1", 1)
        if cfg.causal and cfg.padding:
            add("attn_mask", (dim("B"), one, dim("L_q"), dim("L_k")), ("key_padding_mask",),
                "attn_mask = causal & ~key_padding_mask[:, None, None, :]",
                "True = may attend (SDPA's convention), broadcast over the heads")
        elif cfg.causal:
            add("attn_mask", (dim("L_q"), dim("L_k")), (),
                "attn_mask = torch.ones(L_q, L_k, dtype=torch.bool).tril()",
                "True = may attend (SDPA's convention), broadcast over the batch and the heads")
        else:
            add("attn_mask", (dim("B"), one, one, dim("L_k")), ("key_padding_mask",),
                "attn_mask = ~key_padding_mask[:, None, None, :]",
                "True = may attend (SDPA's convention), broadcast over the heads and the queries")
    scores_in = ("q_heads", keys) + (("attn_mask",) if cfg.masked else ())
    masked = ", masked where attn_mask is False" if cfg.masked else ""
    add("scores", (dim("B"), dim("num_heads"), dim("L_q"), dim("L_k")), scores_in,
        f"scores = q_heads @ {keys}.transpose(-2, -1) / math.sqrt(d_k)",
        f"one score per (query, key) pair in every head{masked}")
    add("weights", (dim("B"), dim("num_heads"), dim("L_q"), dim("L_k")), ("scores",),
        "weights = scores.softmax(dim=-1)", "softmax over the keys")
    add("head_outputs", (dim("B"), dim("num_heads"), dim("L_q"), dim("d_v")), ("weights", values),
        f"head_outputs = weights @ {values}", "each query's weighted sum of the values, per head")
    add("merged", (dim("B"), dim("L_q"), ("num_heads·d_v", H * d_v)), ("head_outputs",),
        "merged = head_outputs.transpose(1, 2).reshape(B, L_q, num_heads·d_v)", "the heads side by side again")
    add("output", (dim("B"), dim("L_q"), dim("d_model")), ("merged",), "output = W_O(merged)",
        "nn.Linear(num_heads·d_v, d_model)")
    return tuple(points)
