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
``L > 1`` and ``d_v > 1``, in NumPy and in torch).  How each mask of an
exercise is spelled for each API is :func:`tutor.numeric.pytorch_masks`'s
(issue 10, section 2).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..messages import join_and, t
from ._common import _shape_text

if TYPE_CHECKING:  # pragma: no cover
    from tutor.exercise.record import Exercise

    from .layer import MultiHeadAttention


@dataclass(frozen=True)
class TraceStep:
    """One step of a forward pass as shapes: what a shape drill or ``explain`` shows.

    ``name`` is the step (``"qkv"``, ``"view"``, ``"permute"``, ...);
    ``dims`` the symbolic shape (``("B", "L", "3·H·d_k")``); ``shape`` the
    same shape in numbers (``(4, 512, 1536)``); ``key`` and ``fields`` the
    catalogue sentence that says what produced it (:attr:`note`), naming the
    reshape/transpose in PyTorch spelling.
    """

    name: str
    dims: tuple[str, ...]
    shape: tuple[int, ...]
    key: str
    fields: tuple[tuple[str, object], ...] = ()

    @property
    def note(self) -> str:
        """What produced the step, in words: ``t(key, **fields)``."""
        return t(self.key, **dict(self.fields))

    @property
    def symbolic(self) -> str:
        """``"[B, L, 3·H·d_k]"``."""
        return "[" + ", ".join(self.dims) + "]"

    @property
    def concrete(self) -> str:
        """``"[4, 512, 1536]"``."""
        return _shape_text(self.shape)


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


def shape_trace(
    self: MultiHeadAttention, B: int, L: int, L_k: int | None = None, *, cross: bool = False, masked: bool = False
) -> tuple[TraceStep, ...]:
    """The forward pass of layer ``self`` as an ordered tuple of :class:`TraceStep` (name, shapes, note).

    Both symbolic (``[B, H, L, d_k]``) and concrete shapes, for a batch of
    ``B`` sequences of ``L`` queries over ``L_k`` keys (``L_k = L`` for
    self-attention; ``cross=True`` names the key sequence ``x_kv``).
    ``masked`` adds the ``masked_fill`` step.  The steps are exactly the
    arrays :meth:`forward` makes (a test checks every shape).  Self-attention
    with equal ``d_k``, ``d_v`` reads::

        x [B, L, D] → qkv [B, L, 3·H·d_k] → view [B, L, 3, H, d_k]
        → permute [3, B, H, L, d_k] → scores [B, H, L, L] → (masked)
        → weights [B, H, L, L] → context [B, H, L, d_v]
        → transpose [B, L, H, d_v] → merge [B, L, H·d_v] → out_proj [B, L, d_out]

    Raises ``ValueError`` when ``cross`` is set without ``L_k``, or
    self-attention is asked for on a layer whose K, V width is not d_model.
    """
    if cross and L_k is None:
        raise ValueError("a cross-attention trace needs L_k, the length of x_kv")
    if not cross and (L_k not in (None, L) or self.d_kv != self.d_model):
        raise ValueError("self-attention has L_k = L and d_kv = d_model; pass cross=True")
    fused = not cross and self.w_qkv is not None
    Lk = "L_k" if cross else "L"
    sizes = {
        "B": B, "L": L, "L_k": L if L_k is None else L_k, "D": self.d_model, "D_kv": self.d_kv,
        "H": self.num_heads, "d_k": self.d_k, "d_v": self.d_v, "d_out": self.d_out,
    }
    tr = _TraceBuilder(sizes)
    tr.add("x", ("B", "L", "D"))
    if fused:  # the fused projection needs d_k = d_v: one width for q, k and v
        tr.add("qkv", ("B", "L", "3·H·d_k"))
        tr.add("view", ("B", "L", "3", "H", "d_k"))
        tr.add("permute", ("3", "B", "H", "L", "d_k"))
    else:
        if cross:
            tr.add("x_kv", ("B", "L_k", "D_kv"))
        src = "x_kv" if cross else "x"
        tr.add("q", ("B", "L", "H·d_k"))
        tr.add("k", ("B", Lk, "H·d_k"), src=src)
        tr.add("v", ("B", Lk, "H·d_v"), src=src)
        tr.add("q_view", ("B", "L", "H", "d_k"), "trace.split", what="q")
        tr.add("k_view", ("B", Lk, "H", "d_k"), "trace.split", what="k")
        tr.add("v_view", ("B", Lk, "H", "d_v"), "trace.split", what="v")
        tr.add("q_heads", ("B", "H", "L", "d_k"))
        tr.add("k_heads", ("B", "H", Lk, "d_k"), "trace.heads_axis")
        tr.add("v_heads", ("B", "H", Lk, "d_v"), "trace.heads_axis")
    tr.add("scores", ("B", "H", "L", Lk))
    if masked:
        tr.add("masked", ("B", "H", "L", Lk))
    tr.add("weights", ("B", "H", "L", Lk))
    tr.add("context", ("B", "H", "L", "d_v"))
    tr.add("transpose", ("B", "L", "H", "d_v"))
    copies = merge_copies(self.num_heads, L, self.d_v)
    tr.add("merge", ("B", "L", "H·d_v"), "trace.merge.copy" if copies else "trace.merge.view")
    if self.w_o is not None:
        tr.add("out_proj", ("B", "L", "d_out"))
    return tuple(tr.steps)


# --- an exercise's production view --------------------------------------------------------------


def empty_rows(ex: Exercise) -> tuple[str, ...]:
    """The labels of the query rows that may attend to no key at all."""
    allowed = ex.allowed()
    return () if allowed is None else tuple(ex.query_labels[i] for i, row in enumerate(allowed) if not any(row))


def notes(ex: Exercise) -> tuple[str, ...]:
    """Sentences about the exercise's configuration as production code would run it.

    A causal mask with ``L ≠ L_k`` (top-left alignment is not a KV-cache
    decode's bottom-right); a causal mask on cross-attention (not a real
    configuration).
    """
    out = []
    if ex.mask_kind == "causal" and ex.is_cross:
        out.append(t("explain.causal.cross"))
    if ex.mask_kind == "causal" and ex.L != ex.L_k:
        out.append(t("explain.causal.offset", L=ex.L, L_k=ex.L_k, shift=ex.L_k - ex.L))
    return tuple(out)


def production_view(ex: Exercise, B: int = 1) -> tuple[tuple[TraceStep, ...], tuple[str, ...]]:
    """``(steps, notes)``: the exercise's layer as batched tensors (:func:`tutor.numeric.exercise_trace`)
    with notes that hold for this exercise (a query row with no key to attend sums to 0, not 1),
    and the notes on its configuration (:func:`notes`).  Raises :class:`~tutor.errors.ShapeError`
    as :func:`exercise_trace`."""
    from .layer import exercise_trace

    steps = exercise_trace(ex, B)
    rows = empty_rows(ex)
    if rows:
        steps = tuple(replace(s, key="trace.weights.empty.one" if len(rows) == 1 else "trace.weights.empty.other",
                              fields=(("rows", join_and(list(rows))),)) if s.name == "weights" else s
                      for s in steps)
    return steps, notes(ex)


__all__ = ["TraceStep", "empty_rows", "merge_copies", "notes", "production_view", "shape_trace"]
