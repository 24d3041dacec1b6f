"""A new exercise before it is written (:class:`Draft`): its integers and labels, exactly as the file
will give them, and the words around them.

:func:`drafted` makes one from a draw (:func:`tutor.authoring.draw.draw`)
for any shape: format v1, and the two v2 fields a shape has (the cached
tokens become the cache's K and V; a group's query heads take its first
head's K/V weights).  :func:`as_asked` adds what a v2 spec states that the
numbers were not drawn for.  :func:`tutor.authoring.write.text` writes a
draft.  Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .draw import Candidate, Matrix, matmul, plus
from .shape import Shape
from .spec import Spec

Vector = list[int]


@dataclass(frozen=True)
class Weights:
    """One query head's weights ``w_q [d_model, d_k]``, ``w_k [d_kv, d_k]``, ``w_v [d_kv, d_v]`` and
    biases (``None``: none); with grouped K/V heads, ``w_k``, ``w_v``, ``b_k``, ``b_v`` are its group's."""

    w_q: Matrix
    w_k: Matrix
    w_v: Matrix
    b_q: Vector | None = None
    b_k: Vector | None = None
    b_v: Vector | None = None


@dataclass(frozen=True)
class Draft:
    """Everything an exercise file states.

    ``x [L, d_model]`` holds the new tokens only; ``cache`` one ``(K, V)``
    pair per K/V head for the ``past_tokens`` (``[L_past, d_k]``,
    ``[L_past, d_v]``), projected from their inputs ``past_x``
    (``[L_past, d_model]``).  ``kv_heads``: the number of K/V heads when fewer
    than the query heads (then written as ``num_kv_heads``), else ``None``.
    ``mask``: ``"none"``, ``"causal"``, ``"causal_lower_right"`` or a matrix
    ``[L, L_k]`` (True = may attend); ``key_padding_mask`` in PyTorch's
    polarity (True = a padding key).
    """

    id: str
    title: str
    description: str
    command: str  # the command that writes the file again
    tags: tuple[str, ...]
    difficulty: int
    tokens: tuple[str, ...]
    x: Matrix
    heads: tuple[Weights, ...]
    kv_tokens: tuple[str, ...] | None = None
    x_kv: Matrix | None = None
    past_tokens: tuple[str, ...] = ()
    cache: tuple[tuple[Matrix, Matrix], ...] = ()
    past_x: Matrix = field(default_factory=list)
    kv_heads: int | None = None
    fused: bool = False
    w_o: Matrix | None = None
    b_o: Vector | None = None
    mask: str | tuple[tuple[bool, ...], ...] = "none"
    key_padding_mask: tuple[bool, ...] | None = None
    alibi: bool = False
    rope: tuple[int, str] | None = None  # format v3: RoPE's (base, pairing)
    norm: str | None = None  # the pre-norm block (issue 23)
    norm_eps: str | None = None  # as written (a fraction), None: 0
    residual: bool = False
    window: tuple[int, int] | None = None  # issue 23: mask {sliding_window: W, sinks: S} as (W, S), instead of mask
    norm_placement: str | None = None  # issue 23: "post" written as it is; None or "pre": not written (pre is the default)
    # issue 23: multi-head latent attention's (d_c, W_DKV [d_model, d_c], ((W_UK [d_c, d_k], W_UV [d_c, d_v]) per head));
    # the heads' w_k, w_v are then the products W_DKV·W_UK, W_DKV·W_UV (what the loader computes), not written
    mla: tuple[int, Matrix, tuple[tuple[Matrix, Matrix], ...]] | None = None
    # the title and description in the language of the run, when it is not English: (language, title, description)
    translations: tuple[tuple[str, str, str], ...] = ()


def drafted(shape: Shape, c: Candidate, *, id: str, title: str, description: str, command: str,
            tags: list[str] | tuple[str, ...], difficulty: int) -> Draft:
    """The draft of draw ``c`` of ``shape``, with the words given.

    Format v2: the first ``shape.past`` tokens are cached (their K and V
    per K/V head, computed here, go in ``cache``; their x in ``past_x``),
    and with ``shape.kv_heads`` each query head takes the K/V weights of
    its group's first head.
    """
    N, per = shape.past, shape.per_group
    heads = []
    for h, head in enumerate(c.heads):
        first = c.heads[h // per * per]  # the head whose K/V weights the group shares
        heads.append(Weights(head.w[0], first.w[1], first.w[2], head.b[0], first.b[1], first.b[2]))
    x_past = c.x[:N]  # [L_past, d_model]
    cache = tuple((plus(matmul(x_past, w.w_k), w.b_k), plus(matmul(x_past, w.w_v), w.b_v))  # [L_past, d_k], [L_past, d_v]
                  for w in heads[::per]) if N else ()
    grouped = shape.kv_heads is not None and shape.kv_heads < len(shape.heads)
    return Draft(id=id, title=title, description=description, command=command, tags=tuple(tags), difficulty=difficulty,
                 tokens=shape.tokens[N:], x=c.x[N:], heads=tuple(heads), kv_tokens=shape.kv_tokens, x_kv=c.x_kv,
                 past_tokens=shape.tokens[:N], cache=cache, past_x=x_past if N else [], kv_heads=shape.kv_heads if grouped else None,
                 fused=shape.fused, w_o=c.w_o, b_o=c.b_o, mask=shape.mask,
                 key_padding_mask=None if shape.key_padding is None else tuple(not real for real in shape.key_padding))


def as_asked(d: Draft, spec: Spec) -> Draft:
    """``d`` with what format-v2 spec ``spec`` states that its numbers were not drawn for: the mask
    aligned lower-right when asked (drawn causal over the whole sequence), the padded key the oldest
    cached one with a cache (left padding; drawn with the last key padded), ALiBi's bias, a sliding window
    (drawn causal; it is aligned bottom-right over a cache by its definition)."""
    mask = "causal_lower_right" if spec.mask == "causal_lower_right" else d.mask
    pads = d.key_padding_mask
    if pads is not None and spec.cache:
        pads = pads[-1:] + pads[:-1]  # the padded key moves to the front
    from .spec import ROPE_BASE

    window = None if spec.window is None else (spec.window, spec.sinks or 0)
    rope = None if spec.rope is None else (ROPE_BASE, spec.rope)
    return replace(d, mask=mask, key_padding_mask=pads, alibi=spec.alibi, window=window, rope=rope)
