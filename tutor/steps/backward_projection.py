"""The backward pass into the projections' weights and biases: ``d_W_Q``, ``d_W_K``, ``d_W_V``, ``d_b_Q``, ``d_b_K``, ``d_b_V``.

``Q = X·W_Q + b_Q`` gives ``d_W_Q = Xᵀ·d_Q`` and ``d_b_Q = Σ_rows d_Q``
(likewise K and V from ``X_kv``).  With grouped K/V heads the K/V weights'
gradients belong to the K/V head (the sum over its group, as ``d_K``,
``d_V`` are); with a KV cache only the new tokens' rows of ``d_K``, ``d_V``
reach ``W_K``, ``W_V`` and their biases (the cached rows are constants of
the decode step).  ``d_b_K`` is 0 without a cache: adding one vector to
every key shifts each row of scores by one constant, which the softmax
ignores.

Each kind's engines, side by side: the exact build (:mod:`tutor.exact.backward`),
the float walk and its slack (under ``bias_grad="mean"``: rows averaged, not
summed), the batched layer's gradient and its rounding bound.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from fractions import Fraction
from typing import TYPE_CHECKING, cast

from ..base.messages import Msg, Text
from ..exact import backward as eb
from ..exercise.record import Exercise
from .grad import (
    bias_step,
    bias_sum,
    bias_work,
    default_why,
    given_of,
    givens,
    kv_name,
    kv_tags,
    kv_why,
    new_rows,
    new_slice,
    own,
    product,
    production,
    reaching,
    rounding,
    rows_note,
)
from .kind import Input, StepKind, always, dims, given_matrix
from .records import Operand, Solution, Step
from .state import Build, Replay

if TYPE_CHECKING:
    import numpy as np

    from .rounding import Array
else:
    from ..base.lazy import numpy as np


_SOURCE = {"d_w_q": "d_q", "d_w_k": "d_k", "d_w_v": "d_v", "d_b_q": "d_q", "d_b_k": "d_k", "d_b_v": "d_v"}


def _x_of(ex: Exercise, src: str) -> Sequence[Sequence[Fraction]]:
    return ex.x if src == "d_q" else ex.kv  # step id: W_Q multiplies X, W_K and W_V multiply X_kv


# --- d_W = Xᵀ·d_Q (X_kvᵀ·d_K, X_kvᵀ·d_V: the new rows with a KV cache) --------------------------------------


def _d_w(id: str) -> Callable[[Build, int | None], Step]:
    src = _SOURCE[id]

    def build(bd: Build, h: int | None) -> Step:
        ex = bd.ex
        x = _x_of(ex, src)
        (d,) = bd.inputs(KINDS[id], h)
        g = cast(eb.Grads, d)[new_rows(ex, src)]  # with a KV cache only the new rows reach W_K, W_V
        name, xname = "d_" + src[2:].upper() + rows_note(ex, src), "X" if src == "d_q" else kv_name(ex)
        out = eb.left_t(x, g)  # [d_in, n]·[n, d] -> [d_in, d]
        return Step(id, h, f"d_W_{src[2:].upper()}", f"d_W_{src[2:].upper()} = {xname}ᵀ·{name}",
                    (Operand(f"{xname}ᵀ", (len(x[0]), len(x))), Operand(name, (len(x), len(g[0])))), "·",
                    eb.grads_exact(out), dims("r", len(x[0])), dims("d", len(g[0])),
                    **(kv_tags(ex, h) if src != "d_q" else {}))  # type: ignore[arg-type]

    return build


def _d_w_floats(id: str) -> Callable[[Replay, int | None], Array | None]:
    src = _SOURCE[id]

    def run(r: Replay, head: int | None) -> Array | None:
        """``Xᵀ·d_Q`` ``[d_model, d_k]``; ``X_kvᵀ·d_K`` ``[d_kv, d_k]``, ``X_kvᵀ·d_V`` ``[d_kv, d_v]``."""
        (g,) = r.inputs(KINDS[id], head)
        if g is None:
            return None
        g = g[slice(None) if src == "d_q" else new_slice(r)]  # [n, d]; with a KV cache only the new rows of d_K, d_V
        x = r.x if src == "d_q" else r.kv  # [n, d_in]
        return None if g.shape[0] != x.shape[0] else x.T @ g  # [d_in, n]·[n, d] -> [d_in, d]

    return run


def _d_w_slack(id: str) -> Callable[[Replay, int | None], Array]:
    src = _SOURCE[id]

    def run(r: Replay, head: int | None) -> Array:
        x = r.x if src == "d_q" else r.kv
        return np.abs(x.T) @ r.delta(src, head)[slice(None) if src == "d_q" else new_slice(r)]

    return run


def _with_x(sol: Solution, step: Step) -> tuple[Input, ...]:
    """The step's own input, and the X (or X_kv) the weights multiply, its rows labelled by token."""
    ex = sol.exercise
    src = _SOURCE[step.id]
    mat = _x_of(ex, src)
    name = "X" if src == "d_q" else kv_name(ex)
    rows = ex.query_labels if src == "d_q" else ex.new_key_labels
    return givens(own(src))(sol, step) + (given_matrix(name, mat, rows, dims("d", len(mat[0]))),)


def _d_w_kind(id: str) -> StepKind:
    src = _SOURCE[id]
    letter = src[2:].upper()
    slack = _d_w_slack(id)
    return StepKind(
        id=id, scope="head", op="·", exists=always, inputs=lambda ex, head: ((src, head),), build=_d_w(id),
        floats=_d_w_floats(id), slack=slack, production=production(id), rounding=rounding(slack),
        work=product(lambda sol, step: given_of("X" if src == "d_q" else kv_name(sol.exercise), _x_of(sol.exercise, src)).T,
                     lambda sol, step: reaching(sol, src, step.head)),
        given=_with_x,
        latex=rf"d_{{W_{letter}}} = X^\top d_{letter}" + ("" if src == "d_q" else "$new"), backward=True, per_kv_head=src != "d_q",
        why=kv_why if src != "d_q" else default_why,
    )


# --- d_b = Σ_rows d_Q (d_K, d_V: the new rows with a KV cache) ---------------------------------------------


def _d_b(id: str) -> Callable[[Build, int | None], Step]:
    src = _SOURCE[id]

    def build(bd: Build, h: int | None) -> Step:
        ex = bd.ex
        (d,) = bd.inputs(KINDS[id], h)
        g = cast(eb.Grads, d)[new_rows(ex, src)]  # with a KV cache b_K, b_V reach the new rows only
        letter = src[2:].upper()
        step = bias_step(id, f"d_b_{letter}", src, f"d_{letter}{rows_note(ex, src)}", g, dims("d", len(g[0])), h, len(g))
        return replace(step, **kv_tags(ex, h)) if src != "d_q" else step  # type: ignore[arg-type]

    return build


def _d_b_floats(id: str) -> Callable[[Replay, int | None], Array | None]:
    src = _SOURCE[id]

    def run(r: Replay, head: int | None) -> Array | None:
        """``Σ_rows d_Q`` ``[1, d_k]`` (``d_K``, ``d_V``: the new rows with a KV cache)."""
        (g,) = r.inputs(KINDS[id], head)
        if g is not None and src != "d_q":
            g = g[new_slice(r)]
        return bias_sum(r, g)

    return run


def _d_b_slack(id: str) -> Callable[[Replay, int | None], Array]:
    src = _SOURCE[id]

    def run(r: Replay, head: int | None) -> Array:
        return r.delta(src, head)[slice(None) if src == "d_q" else new_slice(r)].sum(axis=0, keepdims=True)

    return run


def _d_b_why(step: Step, ex: Exercise) -> list[Text]:
    out = kv_why(step, ex)
    if step.id == "d_b_k" and not ex.has_cache:  # step id: only b_K's gradient vanishes (the softmax's shift)
        out.append(Msg("step.d_b_k.why.zero"))
    return out


def _d_b_kind(id: str) -> StepKind:
    src = _SOURCE[id]
    field = id[2:]
    slack = _d_b_slack(id)
    return StepKind(
        id=id, scope="head", op="Σ", exists=lambda ex: any(getattr(hd, field) is not None for hd in ex.heads),
        inputs=lambda ex, head: ((src, head),), build=_d_b(id), floats=_d_b_floats(id), slack=slack,
        production=production(id), rounding=rounding(slack), work=bias_work, given=givens(own(src)),
        varies=frozenset({"bias_grad"}), latex=rf"d_{{b_{src[2:].upper()}}} = \textstyle\sum_{{\text{{rows}}}} d_{src[2:].upper()}" + ("" if src == "d_q" else "$new"),
        backward=True, per_kv_head=src != "d_q", why=_d_b_why if src != "d_q" else default_why,
    )


D_W_Q, D_W_K, D_W_V = _d_w_kind("d_w_q"), _d_w_kind("d_w_k"), _d_w_kind("d_w_v")
D_B_Q, D_B_K, D_B_V = _d_b_kind("d_b_q"), _d_b_kind("d_b_k"), _d_b_kind("d_b_v")
#: The projections' backward kinds, in the contract's order.
PROJECTION_GRADS: tuple[StepKind, ...] = (D_W_Q, D_W_K, D_W_V, D_B_Q, D_B_K, D_B_V)
KINDS = {k.id: k for k in PROJECTION_GRADS}
