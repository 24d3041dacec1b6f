"""The production forward pass as shapes: what a shape drill or ``explain`` shows.

Pure: no arrays are made; the shapes are those :meth:`MultiHeadAttention.forward`
creates (a test checks every one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._common import _shape_text

if TYPE_CHECKING:  # pragma: no cover
    from .layer import MultiHeadAttention


@dataclass(frozen=True)
class TraceStep:
    """One step of a forward pass as shapes: what a shape drill or ``explain`` shows.

    ``name`` is the step (``"qkv"``, ``"view"``, ``"permute"``, ...);
    ``dims`` the symbolic shape (``("B", "L", "3·H·d_h")``); ``shape`` the
    same shape in numbers (``(4, 512, 1536)``); ``note`` says what produced it,
    naming the reshape/transpose in PyTorch spelling.
    """

    name: str
    dims: tuple[str, ...]
    shape: tuple[int, ...]
    note: str

    @property
    def symbolic(self) -> str:
        """``"[B, L, 3·H·d_h]"``."""
        return "[" + ", ".join(self.dims) + "]"

    @property
    def concrete(self) -> str:
        """``"[4, 512, 1536]"``."""
        return _shape_text(self.shape)


def _dim_value(expr: str, sizes: dict[str, int]) -> int:
    """Evaluate a dimension like ``"3·H·d_h"`` (factors joined by ``·``) from ``sizes``."""
    n = 1
    for factor in expr.split("·"):
        n *= int(factor) if factor.isdigit() else sizes[factor]
    return n


class _TraceBuilder:
    def __init__(self, sizes: dict[str, int]):
        self.sizes = sizes
        self.steps: list[TraceStep] = []

    def add(self, name: str, dims: tuple[str, ...], note: str) -> None:
        shape = tuple(_dim_value(d, self.sizes) for d in dims)
        self.steps.append(TraceStep(name, dims, shape, note))



def shape_trace(
    self: MultiHeadAttention, B: int, L: int, L_k: int | None = None, *, cross: bool = False, masked: bool = False
) -> tuple[TraceStep, ...]:
    """The forward pass of layer ``self`` as an ordered tuple of :class:`TraceStep` (name, shapes, note).

    Both symbolic (``[B, H, L, d_h]``) and concrete shapes, for a batch of
    ``B`` sequences of ``L`` queries over ``L_k`` keys (``L_k = L`` for
    self-attention; ``cross=True`` names the key sequence ``x_kv``).
    ``masked`` adds the ``masked_fill`` step.  The steps are exactly the
    arrays :meth:`forward` makes (a test checks every shape).  Self-attention
    with equal ``d_k``, ``d_v`` reads::

        x [B, L, D] → qkv [B, L, 3·H·d_h] → view [B, L, 3, H, d_h]
        → permute [3, B, H, L, d_h] → scores [B, H, L, L] → (masked)
        → weights [B, H, L, L] → context [B, H, L, d_h]
        → transpose [B, L, H, d_h] → merge [B, L, H·d_h] → out_proj [B, L, d_out]

    Raises ``ValueError`` when ``cross`` is set without ``L_k``, or
    self-attention is asked for on a layer whose K, V width is not d_model.
    """
    if cross and L_k is None:
        raise ValueError("a cross-attention trace needs L_k, the length of x_kv")
    if not cross and (L_k not in (None, L) or self.d_kv != self.d_model):
        raise ValueError("self-attention has L_k = L and d_kv = d_model; pass cross=True")
    fused = not cross and self.w_qkv is not None
    Lk = "L_k" if cross else "L"
    dk, dv = ("d_h", "d_h") if self.d_k == self.d_v else ("d_k", "d_v")
    sizes = {
        "B": B, "L": L, "L_k": L if L_k is None else L_k, "D": self.d_model, "D_kv": self.d_kv,
        "H": self.num_heads, "d_h": self.d_k, "d_k": self.d_k, "d_v": self.d_v, "d_out": self.d_out,
    }
    t = _TraceBuilder(sizes)
    t.add("x", ("B", "L", "D"), "input: a batch of B sequences of L tokens")
    if fused:
        t.add("qkv", ("B", "L", f"3·H·{dk}"), "x @ W_qkv + b_qkv: one fused projection for Q, K and V")
        t.add("view", ("B", "L", "3", "H", dk), "view: split the last axis into (q|k|v, head, d_h); no copy")
        t.add("permute", ("3", "B", "H", "L", dk), "permute(2, 0, 3, 1, 4), then q, k, v = unbind(0)")
    else:
        if cross:
            t.add("x_kv", ("B", "L_k", "D_kv"), "the sequence K and V come from (cross-attention)")
        src = "x_kv" if cross else "x"
        t.add("q", ("B", "L", f"H·{dk}"), "x @ W_q + b_q")
        t.add("k", ("B", Lk, f"H·{dk}"), f"{src} @ W_k + b_k")
        t.add("v", ("B", Lk, f"H·{dv}"), f"{src} @ W_v + b_v")
        t.add("q_view", ("B", "L", "H", dk), "view: split q into heads; no copy")
        t.add("k_view", ("B", Lk, "H", dk), "view: split k into heads; no copy")
        t.add("v_view", ("B", Lk, "H", dv), "view: split v into heads; no copy")
        t.add("q_heads", ("B", "H", "L", dk), "transpose(1, 2): heads become a batch axis")
        t.add("k_heads", ("B", "H", Lk, dk), "transpose(1, 2)")
        t.add("v_heads", ("B", "H", Lk, dv), "transpose(1, 2)")
    t.add("scores", ("B", "H", "L", Lk), f"q @ k.transpose(-2, -1) / √{dk} (the scale is applied to q)")
    if masked:
        t.add("masked", ("B", "H", "L", Lk), "masked_fill(~allowed, -inf); allowed is [B, 1, L, L_k], broadcast over heads")
    t.add("weights", ("B", "H", "L", Lk), "softmax over the last axis (keys); each row sums to 1")
    t.add("context", ("B", "H", "L", dv), "weights @ v")
    t.add("transpose", ("B", "L", "H", dv), "transpose(1, 2): back to tokens first; no copy")
    t.add("merge", ("B", "L", f"H·{dv}"), "reshape (a contiguous copy): the heads side by side")
    if self.w_o is not None:
        t.add("out_proj", ("B", "L", "d_out"), "merge @ W_o + b_o")
    return tuple(t.steps)

