"""What the backward pass's kinds share: the matrices a worked entry reads, grouped K/V heads, a KV cache's rows.

The backward pass's kinds are in :mod:`tutor.steps.backward_layer` (the layer:
``d_output`` … ``d_b_o``, and ``d_x``, ``d_x_kv``),
:mod:`tutor.steps.backward_head` (one head: ``d_head_output`` … ``d_k``) and
:mod:`tutor.steps.backward_projection` (the projections' weights and
biases).  ``d_<m>`` is ``∂L/∂<m>`` for the loss whose gradient at the output
is ``upstream`` (all ones by default); the chain rule through
``output = concat·W_O + b_O`` and, per head, ``head = weights·V``,
``weights = softmax(scaled)``, ``scaled = Q·Kᵀ/√d_k``, ``Q = X·W_Q + b_Q``,
``K = X_kv·W_K + b_K``, ``V = X_kv·W_V + b_V`` (Vaswani et al. 2017, eq. 1
and §3.2.2; the softmax's gradient as in Dao 2023, FlashAttention-2,
Algorithm 2).  The exact math is :mod:`tutor.exact.backward`; the batched
layer's gradients :func:`tutor.numeric.backward.scaled_dot_product_attention_backward`
(read off a run's :attr:`~tutor.numeric.layer.LayerRun.grads`).

Format v2: with grouped K/V heads the K/V-side gradients are the sum over
the query heads of the group (:func:`kv_group`), computed once per group;
with a KV cache only the new tokens' rows of ``d_K``, ``d_V`` reach the
weights and X (:func:`new_rows`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import TYPE_CHECKING, cast

from ..base.decimals import legible
from ..base.messages import Msg, Text
from ..exact import backward as eb
from ..exact.numbers import Exact
from ..exercise.record import Exercise
from .kind import Input, given_step
from .records import Key, Operand, Solution, Step
from .rounding import UNIT
from .state import Build, Replay
from .worked import as_written, carried, dot, factor, total

if TYPE_CHECKING:
    import numpy as np

    from ..numeric.layer import LayerRun
    from .rounding import Array
else:
    from ..base.lazy import numpy as np


# --- matrices a worked entry reads -----------------------------------------------------------------

@dataclass(frozen=True)
class M:
    """A matrix as a worked entry reads it: its name, exact entries and floats (``T``: transposed)."""

    name: str
    exact: tuple[tuple[Exact | Fraction, ...], ...]
    value: tuple[tuple[float, ...], ...]

    @property
    def T(self) -> M:
        return M(self.name + "ᵀ", tuple(zip(*self.exact)), tuple(zip(*self.value)))


def step_of(sol: Solution, id: str, head: int | None) -> M:
    s = sol.step(id, head)
    return M(s.name, s.exact, s.value)


def given_of(name: str, m: Sequence[Sequence[Fraction]]) -> M:
    return M(name, tuple(tuple(row) for row in m), tuple(tuple(float(x) for x in row) for row in m))


def product_work(A: M, B: M, step: Step, i: int, j: int, scale: str = "") -> str:
    """``d_V[t1, d1] = weightsᵀ[t1, :]·d_head_1[:, d1] = 0.1084·1 + … ≈ 0.1658``."""
    def make(p: int) -> tuple[list[tuple[str, str]], str]:
        return [(factor(A.exact[i][k], A.value[i][k], p), factor(B.exact[k][j], B.value[k][j], p))
                for k in range(len(B.exact))], ""

    pairs = make(6)[0] if scale else carried(make, step.value[i][j])[0]  # divided by a root: no decimal sum to check
    rl, cl = step.row_labels[i], step.col_labels[j]
    body = dot(pairs)
    if scale:
        return f"{A.name}[{rl}, :]·{B.name}[:, {cl}] / {scale} = ({body}) / {scale} {total(step.exact[i][j], step.value[i][j])}"
    return f"{A.name}[{rl}, :]·{B.name}[:, {cl}] = {body} {total(step.exact[i][j], step.value[i][j])}"


def sqrt_dk(ex: Exercise, head: int | None) -> str:
    return f"sqrt({ex.heads[head or 0].d_k})"


# --- what exists, and the sources --------------------------------------------------------------------


def heads_key(ex: Exercise) -> Key:
    """What W_O multiplies: the concatenation, or head 1's output with one head."""
    return ("concat", None) if ex.num_heads > 1 else ("head_output", 0)


def d_head_source(ex: Exercise) -> Key:
    return ("d_concat", None) if ex.w_o is not None else ("d_output", None)


def final_key(bd: Build) -> Key:
    """The forward pass's last step (``output``, ``concat`` or ``head_output``): what ``d_output`` is the gradient of."""
    return [k for k, s in bd.steps.items() if not k[0].startswith("d_")][-1]


def kv_name(ex: Exercise) -> str:
    return "X_kv" if ex.is_cross else "X"


# --- format v2: grouped K/V heads, a KV cache ----------------------------------------------------------


def kv_group(ex: Exercise, head: int | None) -> tuple[int, ...]:
    """The query heads whose K/V gradients add up in ``head``'s: its K/V head's group (grouped K/V heads), else itself."""
    return ex.sharing(ex.kv_head(head or 0)) if ex.grouped else (head or 0,)


def kv_tags(ex: Exercise, head: int | None) -> dict[str, object]:
    """A K/V-side step of grouped K/V heads belongs to its K/V head (as ``k`` and ``v`` do): ``kv_head``, ``shared``."""
    if not ex.grouped:
        return {}
    return {"kv_head": ex.kv_head(head or 0), "shared": kv_group(ex, head)}


def sigma(ex: Exercise, head: int | None) -> str:
    """``Σ_h∈{1,2} `` before a K/V gradient of grouped heads (the sum over the query heads of the group)."""
    if not ex.grouped or len(kv_group(ex, head)) == 1:
        return ""
    return "Σ_h∈{" + ",".join(str(h + 1) for h in kv_group(ex, head)) + "} "


def summed(parts: Sequence[eb.Grads]) -> eb.Grads:
    """Entry-wise sum of gradient matrices of one shape (the heads of a group)."""
    out: eb.Grads = [[eb.GradSum() for _ in row] for row in parts[0]]
    for g in parts:
        for i, row in enumerate(g):
            for j, x in enumerate(row):
                out[i][j].add(x, Fraction(1))
    return out


def group_grads(bd: Build, id: str, head: int | None, one: Callable[[int], eb.Grads]) -> eb.Grads:
    """``d_k`` or ``d_v`` of ``head``: ``one(h)`` summed over its group, computed once per group (the first head)."""
    group = kv_group(bd.ex, head)
    if (head or 0) != group[0]:
        return cast(eb.Grads, bd.data[id, group[0]])
    return one(group[0]) if len(group) == 1 else summed([one(h) for h in group])


def new_rows(ex: Exercise, id: str) -> slice:
    """The rows of ``d_K``/``d_V`` that reach W_K, W_V, b_K, b_V and X: the new tokens' (with a KV cache the
    cached rows are constants of the decode step); every row otherwise."""
    return slice(ex.L_past if id in ("d_k", "d_v") else 0, None)


def rows_note(ex: Exercise, id: str) -> str:
    """With a KV cache, the rows of d_K and d_V that reach the weights, as a slice: ``[2:]``, the new
    tokens' rows after ``L_past`` cached ones (the cached keys and values were projected before)."""
    return f"[{ex.L_past}:]" if id in ("d_k", "d_v") and ex.has_cache else ""


def bias_step(id: str, name: str, src: str, src_name: str, g: eb.Grads, cols: tuple[str, ...], head: int | None,
               rows: int) -> Step:
    return Step(id, head, name, f"{name} = Σ_rows {src_name}", (Operand(src_name, (rows, len(cols))),), "Σ",
                eb.grads_exact(eb.column_sums(g)), ("Σ",), cols)


def bias_work(sol: Solution, step: Step, i: int, j: int) -> str:
    ex = sol.exercise
    src = sol.step(*bias_source(ex, step))
    rows = range(src.shape[0])[new_rows(ex, src.id)]
    terms = [factor(src.exact[r][j], src.value[r][j]) for r in rows]
    exact = as_written([(x, "1") for x in terms], "", step.exact[i][j])  # "= 6" only if the terms give 6
    return (f"Σ_rows {src.name}{rows_note(ex, src.id)}[:, {step.col_labels[j]}] = {' + '.join(terms)} "
            f"{total(step.exact[i][j], step.value[i][j], rounded=not exact)}")


def bias_source(ex: Exercise, step: Step) -> Key:
    src = {"d_b_o": "d_output", "d_b_q": "d_q", "d_b_k": "d_k", "d_b_v": "d_v"}[step.id]
    return (src, step.head)


def num(v: float, places: int = 6) -> str:
    """A float operand: ``0``, ``3.783215``, ``(-0.193301)``: at 6 places, two more than the result it adds
    up to (F8 of the class trial: terms at the result's 4 places summed to 1.6749 beside ≈ 1.6750)."""
    text = "0" if v == 0 else legible(v, places)
    return f"({text})" if text.startswith("-") else text


def product(a: Callable[[Solution, Step], M], b: Callable[[Solution, Step], M],
             scale: Callable[[Solution, Step], str] = lambda sol, step: "") -> Callable[[Solution, Step, int, int], str]:
    return lambda sol, step, i, j: product_work(a(sol, step), b(sol, step), step, i, j, scale(sol, step))


def givens(*keys: Callable[[Solution, Step], Key]) -> Callable[[Solution, Step], tuple[Input, ...]]:
    return lambda sol, step: tuple(given_step(sol.step(*k(sol, step))) for k in keys)


def kv_grad_work(a: str, b: str, scaled: bool) -> Callable[[Solution, Step, int, int], str]:
    """``d_V = Σ_h weights_hᵀ·d_head_h``, ``d_K = Σ_h d_scaled_hᵀ·Q_h / √d_k``: one product per head of the group."""
    def work(sol: Solution, step: Step, i: int, j: int) -> str:
        ex = sol.exercise
        group = kv_group(ex, step.head)
        scale = sqrt_dk(ex, step.head) if scaled else ""
        if len(group) == 1:
            return product_work(step_of(sol, a, group[0]).T, step_of(sol, b, group[0]), step, i, j, scale)
        bodies = []
        for h in group:
            A, B = step_of(sol, a, h).T, step_of(sol, b, h)
            bodies.append("(" + dot([(factor(A.exact[i][k], A.value[i][k]), factor(B.exact[k][j], B.value[k][j]))
                                     for k in range(len(B.exact))]) + ")")
        rl, cl = step.row_labels[i], step.col_labels[j]
        an, bn = ("weights", "d_head") if a == "weights" else ("d_scaled", "Q")
        body = " + ".join(bodies)
        head = f"Σ_h {an}_hᵀ[{rl}, :]·{bn}_h[:, {cl}]"
        if scale:
            return f"{head} / {scale} = ({body}) / {scale} {total(step.exact[i][j], step.value[i][j])}"
        return f"{head} = {body} {total(step.exact[i][j], step.value[i][j])}"

    return work


def reaching(sol: Solution, src: str, head: int | None) -> M:
    """``d_<src>`` as far as it reaches the weights: with a KV cache, the new tokens' rows of d_K and d_V."""
    m = step_of(sol, src, head)
    rows = new_rows(sol.exercise, src)
    if rows.start == 0:
        return m
    return M(m.name + rows_note(sol.exercise, src), m.exact[rows], m.value[rows])


def default_why(step: Step, ex: Exercise) -> list[Text]:
    return [Msg(f"step.{step.id}.why")]


def kv_why(step: Step, ex: Exercise) -> list[Text]:
    """A K/V gradient's why, and what grouped K/V heads and a KV cache change."""
    out: list[Text] = [Msg(f"step.{step.id}.why")]
    if ex.grouped and len(kv_group(ex, step.head)) > 1:
        out.append(Msg("step.d_kv.why.grouped", kv=ex.kv_head(step.head or 0) + 1,
                     heads=Msg.joined("list.sep", [str(h + 1) for h in kv_group(ex, step.head)])))
    if ex.has_cache:
        cached = step.id in ("d_k", "d_v")  # step id: d_K's rows are the cached keys, d_V's the cached values
        out.append(Msg(f"step.{step.id}.why.cache", L_past=ex.L_past) if cached
                   else Msg("step.d_kv.why.cache_weights", L_past=ex.L_past))
    return out


def has_w_o(ex: Exercise) -> bool:
    return ex.w_o is not None


def own(id: str) -> Callable[[Solution, Step], Key]:
    return lambda sol, step: (id, step.head)


def layer_key(id: str) -> Callable[[Solution, Step], Key]:
    return lambda sol, step: (id, None)


# --- the float walk: grouped K/V heads, a cache's new rows, a bias's rows summed ---------------------------


def floats_of(m: object) -> Array:
    """An exercise matrix (exact rationals) as float64."""
    return np.array(m, dtype=object).astype(np.float64)


def walked_group(r: Replay, head: int | None) -> tuple[int, ...]:
    """The query heads whose K/V gradients the walk adds up in ``head``'s: its group, or ``head`` alone under
    ``kv_grad="own"`` (the misconception that takes one head's share)."""
    if not r.ex.grouped or r.variant.kv_grad == "own":
        return (head or 0,)
    return kv_group(r.ex, head)


def group_sum(r: Replay, head: int | None, one: Callable[[int], Array | None]) -> Array | None:
    """``one(h)`` summed over ``head``'s group; ``None`` when a head's part cannot be reached or shapes differ."""
    acc: Array | None = None
    for h in walked_group(r, head):
        part = one(h)
        if part is None or (acc is not None and part.shape != acc.shape):
            return None
        acc = part if acc is None else acc + part
    return acc


def new_slice(r: Replay) -> slice:
    """The rows of ``d_k``/``d_v`` that reach the weights and X: with a KV cache the new tokens' only."""
    return slice(r.ex.L_past, None)


def bias_sum(r: Replay, g: Array | None) -> Array | None:
    """Rows summed (``[n, d]`` -> ``[1, d]``); averaged under ``bias_grad="mean"``."""
    if g is None:
        return None
    acc = g.sum(axis=0, keepdims=True)  # [1, d]
    return acc / g.shape[0] if r.variant.bias_grad == "mean" else acc


# --- the batched layer: every gradient read off its backward pass -----------------------------------------

_LAYER = frozenset({"d_output", "d_concat", "d_w_o", "d_b_o", "d_x", "d_x_kv"})  # not stacked by head
_BIASES = frozenset({"d_b_o", "d_b_q", "d_b_k", "d_b_v"})  # vectors, read as [1, d]


def production(id: str) -> Callable[[LayerRun, Exercise, int | None], Array]:
    """Step ``id`` of head ``h`` read off the run's gradients (:class:`~tutor.numeric.backward.LayerGrads`)."""
    def read(run: LayerRun, ex: Exercise, h: int | None) -> Array:
        g = run.grads
        assert g is not None, "a run with its backward pass (tutor.production.run_exercise(ex, backward=True))"
        if id == "d_head_output":  # a head's columns of d_concat
            offset = sum(hd.d_v for hd in ex.heads[:h])
            value = g.d_concat[:, offset:offset + ex.heads[h or 0].d_v]  # [L, d_v]
        else:
            value = np.asarray(getattr(g, id))
            if id not in _LAYER:
                value = value[h]  # [H, ...] -> this head's
            if id in _BIASES:
                value = value.reshape(1, -1)
        return np.asarray(value, dtype=np.float64)

    return read


def rounding(slack: Callable[[Replay, int | None], Array]) -> Callable[[Replay, int | None], Array]:
    """The float64 error bound of a gradient read off the layer: its inputs' bounds carried through the step
    (``slack``), plus the step's own rounding, ``γ_n`` times the same expression with every input replaced by
    its magnitude (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., §3.1: a dot product of
    ``n`` terms is off by at most ``γ_n·|a|·|b|``)."""
    def bound(r: Replay, head: int | None) -> Array:
        ex = r.ex
        n = ex.L + ex.L_k + ex.d_model + ex.d_out + 8
        g = n * UNIT / (1 - n * UNIT)
        assert r.slack is not None
        magnitudes = replace(r, slack={k: np.abs(v) for k, v in r.values.items()})
        with np.errstate(invalid="ignore"):
            own_bound = np.nan_to_num(slack(magnitudes, head), nan=0.0, posinf=1e300)
        return np.nan_to_num(slack(r, head), nan=0.0) + 2 * g * own_bound

    return bound

