"""The backward pass, step by step: the gradient of every matrix, from the upstream gradient back to X.

The chain rule through ``output = concat·W_O + b_O`` and, per head,
``head = weights·V``, ``weights = softmax(scaled)``, ``scaled = Q·Kᵀ/√d_k``,
``Q = X·W_Q + b_Q``, ``K = X_kv·W_K + b_K``, ``V = X_kv·W_V + b_V`` (Vaswani
et al. 2017, eq. 1 and §3.2.2; the softmax's gradient ``d_scaled = weights ∘
(d_weights − rowsum(d_weights ∘ weights))`` as in Dao 2023,
FlashAttention-2, Algorithm 2).  ``d_<m>`` is ``∂L/∂<m>`` for the loss whose
gradient at the output is ``upstream`` (all ones by default).  The exact
math is :mod:`tutor.exact.backward`; the float steps
:mod:`tutor.numeric.replay_backward`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import cast

from ..base.decimals import fixed
from ..base.messages import t
from ..exact import backward as eb
from ..exact.engine import QMat
from ..exact.numbers import Exact, SoftmaxRow
from ..exercise.record import Exercise
from .kind import Build, Input, StepKind, always, dims, given_matrix, given_step
from .records import Key, Operand, Solution, Step
from .worked import dot, factor, total

# --- matrices a worked entry reads -----------------------------------------------------------------


@dataclass(frozen=True)
class _M:
    """A matrix as a worked entry reads it: its name, exact entries and floats (``T``: transposed)."""

    name: str
    exact: tuple[tuple[Exact | Fraction, ...], ...]
    value: tuple[tuple[float, ...], ...]

    @property
    def T(self) -> _M:
        return _M(self.name + "ᵀ", tuple(zip(*self.exact)), tuple(zip(*self.value)))


def _step(sol: Solution, id: str, head: int | None) -> _M:
    s = sol.step(id, head)
    return _M(s.name, s.exact, s.value)


def _given(name: str, m: Sequence[Sequence[Fraction]]) -> _M:
    return _M(name, tuple(tuple(row) for row in m), tuple(tuple(float(x) for x in row) for row in m))


def _product_work(A: _M, B: _M, step: Step, i: int, j: int, scale: str = "") -> str:
    """``d_V[t1, d1] = weightsᵀ[t1, :]·d_head_1[:, d1] = 0.1084·1 + … ≈ 0.1658``."""
    pairs = [(factor(A.exact[i][k], A.value[i][k]), factor(B.exact[k][j], B.value[k][j])) for k in range(len(B.exact))]
    rl, cl = step.row_labels[i], step.col_labels[j]
    body = dot(pairs)
    if scale:
        return f"{A.name}[{rl}, :]·{B.name}[:, {cl}] / {scale} = ({body}) / {scale} {total(step.exact[i][j], step.value[i][j])}"
    return f"{A.name}[{rl}, :]·{B.name}[:, {cl}] = {body} {total(step.exact[i][j], step.value[i][j])}"


def _sqrt_dk(ex: Exercise, head: int | None) -> str:
    return f"sqrt({ex.heads[head or 0].d_k})"


# --- what exists, and the sources --------------------------------------------------------------------


def _heads_key(ex: Exercise) -> Key:
    """What W_O multiplies: the concatenation, or head 1's output with one head."""
    return ("concat", None) if ex.num_heads > 1 else ("head_output", 0)


def _d_head_source(ex: Exercise) -> Key:
    return ("d_concat", None) if ex.w_o is not None else ("d_output", None)


def _final_key(bd: Build) -> Key:
    """The forward pass's last step (``output``, ``concat`` or ``head_output``): what ``d_output`` is the gradient of."""
    return [k for k, s in bd.steps.items() if not k[0].startswith("d_")][-1]


def _kv_name(ex: Exercise) -> str:
    return "X_kv" if ex.is_cross else "X"


# --- format v2: grouped K/V heads, a KV cache ----------------------------------------------------------


def _group(ex: Exercise, head: int | None) -> tuple[int, ...]:
    """The query heads whose K/V gradients add up in ``head``'s: its K/V head's group (grouped K/V heads), else itself."""
    return ex.sharing(ex.kv_head(head or 0)) if ex.grouped else (head or 0,)


def _kv_tags(ex: Exercise, head: int | None) -> dict[str, object]:
    """A K/V-side step of grouped K/V heads belongs to its K/V head (as ``k`` and ``v`` do): ``kv_head``, ``shared``."""
    if not ex.grouped:
        return {}
    return {"kv_head": ex.kv_head(head or 0), "shared": _group(ex, head)}


def _sigma(ex: Exercise, head: int | None) -> str:
    """``Σ_h∈{1,2} `` before a K/V gradient of grouped heads (the sum over the query heads of the group)."""
    if not ex.grouped or len(_group(ex, head)) == 1:
        return ""
    return "Σ_h∈{" + ",".join(str(h + 1) for h in _group(ex, head)) + "} "


def _summed(parts: Sequence[eb.Grads]) -> eb.Grads:
    """Entry-wise sum of gradient matrices of one shape (the heads of a group)."""
    out: eb.Grads = [[eb.GradSum() for _ in row] for row in parts[0]]
    for g in parts:
        for i, row in enumerate(g):
            for j, x in enumerate(row):
                out[i][j].add(x, Fraction(1))
    return out


def _group_grads(bd: Build, id: str, head: int | None, one: Callable[[int], eb.Grads]) -> eb.Grads:
    """``d_k`` or ``d_v`` of ``head``: ``one(h)`` summed over its group, computed once per group (the first head)."""
    group = _group(bd.ex, head)
    if (head or 0) != group[0]:
        return cast(eb.Grads, bd.data[id, group[0]])
    return one(group[0]) if len(group) == 1 else _summed([one(h) for h in group])


def _new_rows(ex: Exercise, id: str) -> slice:
    """The rows of ``d_K``/``d_V`` that reach W_K, W_V, b_K, b_V and X: the new tokens' (with a KV cache the
    cached rows are constants of the decode step); every row otherwise."""
    return slice(ex.L_past if id in ("d_k", "d_v") else 0, None)


def _rows_note(ex: Exercise, id: str) -> str:
    return "[new rows]" if id in ("d_k", "d_v") and ex.has_cache else ""


# --- the layer before the heads: d_output, d_concat, d_w_o, d_b_o ----------------------------------------


def _d_output(bd: Build, head: int | None) -> Step:
    ex = bd.ex
    G = [list(r) for r in ex.upstream] if ex.upstream is not None else eb.ones(ex.L, ex.d_out)
    bd.data["d_output", None] = G
    final = bd.steps[_final_key(bd)]
    formula = "d_output = ∂L/∂output = upstream" if ex.upstream is not None else "d_output = ∂L/∂output = 1 (all ones)"
    return Step("d_output", None, "d_output", formula, (Operand("upstream", (ex.L, ex.d_out)),), "=",
                eb.rational_exact(G), final.row_labels, final.col_labels)


def _d_concat(bd: Build, head: int | None) -> Step:
    ex = bd.ex
    assert ex.w_o is not None
    G = cast(eb.Rational, bd.data["d_output", None])
    dC = eb.d_concat(G, ex.w_o)  # [L, d_out]·[d_out, H·d_v] -> [L, H·d_v]
    bd.data["d_concat", None] = dC
    src = bd.steps[_heads_key(ex)]
    return Step("d_concat", None, "d_concat", "d_concat = d_output·W_Oᵀ",
                (Operand("d_output", (ex.L, ex.d_out)), Operand("W_Oᵀ", (ex.d_out, len(ex.w_o)))), "·",
                eb.rational_exact(dC), ex.query_labels, src.col_labels)


def _heads(bd: Build) -> list[tuple[Sequence[SoftmaxRow], QMat]]:
    return [(cast("tuple[SoftmaxRow, ...]", bd.data["weights", h]), cast(QMat, bd.data["v", h]))
            for h in range(bd.ex.num_heads)]


def _d_w_o(bd: Build, head: int | None) -> Step:
    ex = bd.ex
    assert ex.w_o is not None
    G = cast(eb.Rational, bd.data["d_output", None])
    g = eb.d_w_o(_heads(bd), G)  # [H·d_v, L]·[L, d_out] -> [H·d_v, d_out]
    src = bd.steps[_heads_key(ex)].name
    return Step("d_w_o", None, "d_W_O", f"d_W_O = {src}ᵀ·d_output",
                (Operand(f"{src}ᵀ", (len(ex.w_o), ex.L)), Operand("d_output", (ex.L, ex.d_out))), "·",
                eb.grads_exact(g), dims("r", len(ex.w_o)), dims("o", ex.d_out))


def _bias_step(id: str, name: str, src: str, src_name: str, g: eb.Grads, cols: tuple[str, ...], head: int | None,
               rows: int) -> Step:
    return Step(id, head, name, f"{name} = Σ_rows {src_name}", (Operand(src_name, (rows, len(cols))),), "Σ",
                eb.grads_exact(eb.column_sums(g)), ("Σ",), cols)


def _d_b_o(bd: Build, head: int | None) -> Step:
    ex = bd.ex
    G = cast(eb.Rational, bd.data["d_output", None])
    return _bias_step("d_b_o", "d_b_O", "d_output", "d_output", eb.rational_grads(G), dims("o", ex.d_out), None, ex.L)


def _bias_work(sol: Solution, step: Step, i: int, j: int) -> str:
    ex = sol.exercise
    src = sol.step(*_bias_source(ex, step))
    rows = range(src.shape[0])[_new_rows(ex, src.id)]
    parts = " + ".join(factor(src.exact[r][j], src.value[r][j]) for r in rows)
    return (f"Σ_rows {src.name}{_rows_note(ex, src.id)}[:, {step.col_labels[j]}] = {parts} "
            f"{total(step.exact[i][j], step.value[i][j])}")


def _bias_source(ex: Exercise, step: Step) -> Key:
    src = {"d_b_o": "d_output", "d_b_q": "d_q", "d_b_k": "d_k", "d_b_v": "d_v"}[step.id]
    return (src, step.head)


# --- per head ---------------------------------------------------------------------------------------------


def _d_head_output(bd: Build, h: int | None) -> Step:
    ex = bd.ex
    src = _d_head_source(ex)
    g = cast(eb.Rational, bd.data[src])
    offset = sum(hd.d_v for hd in ex.heads[:h])
    d_v = ex.heads[h or 0].d_v
    dH = [row[offset:offset + d_v] for row in g]  # [L, d_v], this head's columns
    bd.data["d_head_output", h] = dH
    name = f"d_head_{(h or 0) + 1}"
    return Step("d_head_output", h, name, f"{name} = {src[0]}[:, columns of head_{(h or 0) + 1}]",
                (Operand(src[0], (ex.L, len(g[0]))),), "=", eb.rational_exact(dH), ex.query_labels, dims("d", d_v))


def _d_head_output_work(sol: Solution, step: Step, i: int, j: int) -> str:
    src = sol.step(*_d_head_source(sol.exercise))
    offset = sum(hd.d_v for hd in sol.exercise.heads[:step.head])
    return f"{src.name}[{step.row_labels[i]}, {src.col_labels[offset + j]}] {total(step.exact[i][j], step.value[i][j])}"


def _d_weights(bd: Build, h: int | None) -> Step:
    ex = bd.ex
    dH = cast(eb.Rational, bd.data["d_head_output", h])
    V = cast(QMat, bd.data["v", h])
    dP = eb.d_weights(dH, V)  # [L, d_v]·[d_v, L_k] -> [L, L_k]
    bd.data["d_weights", h] = dP
    name = f"d_head_{(h or 0) + 1}"
    d_v = ex.heads[h or 0].d_v
    return Step("d_weights", h, "d_weights", f"d_weights = {name}·Vᵀ",
                (Operand(name, (ex.L, d_v)), Operand("Vᵀ", (d_v, ex.L_k))), "·",
                eb.rational_exact(dP), ex.query_labels, ex.key_labels)


def _d_scaled(bd: Build, h: int | None) -> Step:
    ex = bd.ex
    rows = cast("tuple[SoftmaxRow, ...]", bd.data["weights", h])
    dP = cast(eb.Rational, bd.data["d_weights", h])
    return Step("d_scaled", h, "d_scaled", "d_scaled = weights ∘ (d_weights − rowsum(d_weights ∘ weights))",
                (Operand("weights", (ex.L, ex.L_k)), Operand("d_weights", (ex.L, ex.L_k))), "∘",
                eb.grads_exact(eb.d_scaled(rows, dP)), ex.query_labels, ex.key_labels)


def _d_scaled_work(sol: Solution, step: Step, i: int, j: int) -> str:
    P, dP = sol.step("weights", step.head), sol.step("d_weights", step.head)
    rl, cl = step.row_labels[i], step.col_labels[j]
    D = sum(p * g for p, g in zip(P.value[i], dP.value[i]))
    rowsum = " + ".join(f"{factor(dP.exact[i][k], dP.value[i][k])}·{factor(P.exact[i][k], P.value[i][k])}"
                        for k in range(P.shape[1]))
    return (f"weights[{rl}, {cl}]·(d_weights[{rl}, {cl}] − Σ_k d_weights[{rl}, k]·weights[{rl}, k]) = "
            f"{factor(P.exact[i][j], P.value[i][j])}·({factor(dP.exact[i][j], dP.value[i][j])} − ({rowsum})) = "
            f"{factor(P.exact[i][j], P.value[i][j])}·({factor(dP.exact[i][j], dP.value[i][j])} − {_num(D)}) "
            f"{total(step.exact[i][j], step.value[i][j])}")


def _num(v: float) -> str:
    """A float operand: ``0``, ``3.7832``, ``(-0.1933)``."""
    text = "0" if v == 0 else fixed(v, 4)
    return f"({text})" if text.startswith("-") else text


def _d_v(bd: Build, h: int | None) -> Step:
    ex = bd.ex

    def one(hh: int) -> eb.Grads:
        rows = cast("tuple[SoftmaxRow, ...]", bd.data["weights", hh])
        dH = cast(eb.Rational, bd.data["d_head_output", hh])
        return eb.d_v(rows, dH, ex.L_k)  # [L_k, L]·[L, d_v] -> [L_k, d_v]

    g = bd.data["d_v", h] = _group_grads(bd, "d_v", h, one)
    name = f"d_head_{(h or 0) + 1}" if not _sigma(ex, h) else "d_head_h"
    d_v = ex.heads[h or 0].d_v
    formula = f"d_V = {_sigma(ex, h)}weights{'_h' if _sigma(ex, h) else ''}ᵀ·{name}"
    return Step("d_v", h, "d_V", formula, (Operand("weightsᵀ", (ex.L_k, ex.L)), Operand(name, (ex.L, d_v))),
                "·", eb.grads_exact(g), ex.key_labels, dims("d", d_v), **_kv_tags(ex, h))  # type: ignore[arg-type]


def _d_qk(id: str) -> Callable[[Build, int | None], Step]:
    def build(bd: Build, h: int | None) -> Step:
        ex = bd.ex
        rows = cast("tuple[SoftmaxRow, ...]", bd.data["weights", h])
        dP = cast(eb.Rational, bd.data["d_weights", h])
        d_k = ex.heads[h or 0].d_k
        if id == "d_q":  # step id: d_Q reads K, d_K reads Q (and the transpose of d_scaled)
            g = eb.d_q(rows, dP, cast(QMat, bd.data["k", h]), d_k)  # [L, L_k]·[L_k, d_k] -> [L, d_k]
            ops = (Operand("d_scaled", (ex.L, ex.L_k)), Operand("K", (ex.L_k, d_k)))
            formula, labels = "d_Q = d_scaled·K / √d_k", ex.query_labels
        else:
            def one(hh: int) -> eb.Grads:
                rows_h = cast("tuple[SoftmaxRow, ...]", bd.data["weights", hh])
                dP_h = cast(eb.Rational, bd.data["d_weights", hh])
                return eb.d_k(rows_h, dP_h, cast(QMat, bd.data["q", hh]), d_k, ex.L_k)  # [L_k, L]·[L, d_k] -> [L_k, d_k]

            g = _group_grads(bd, id, h, one)
            ops = (Operand("d_scaledᵀ", (ex.L_k, ex.L)), Operand("Q", (ex.L, d_k)))
            sub = "_h" if _sigma(ex, h) else ""
            formula, labels = f"d_K = {_sigma(ex, h)}d_scaled{sub}ᵀ·Q{sub} / √d_k", ex.key_labels
        bd.data[id, h] = g
        return Step(id, h, "d_Q" if id == "d_q" else "d_K", formula, ops,
                    "·", eb.grads_exact(g), labels, dims("d", d_k),
                    **(_kv_tags(ex, h) if id == "d_k" else {}))  # type: ignore[arg-type]

    return build


def _d_w(id: str) -> Callable[[Build, int | None], Step]:
    src = {"d_w_q": "d_q", "d_w_k": "d_k", "d_w_v": "d_v"}[id]

    def build(bd: Build, h: int | None) -> Step:
        ex = bd.ex
        x = ex.x if src == "d_q" else ex.kv  # step id: W_Q multiplies X, W_K and W_V multiply X_kv (the new tokens)
        g = cast(eb.Grads, bd.data[src, h])[_new_rows(ex, src)]  # with a KV cache only the new rows reach W_K, W_V
        name, xname = "d_" + src[2:].upper() + _rows_note(ex, src), "X" if src == "d_q" else _kv_name(ex)
        out = eb.left_t(x, g)  # [d_in, n]·[n, d] -> [d_in, d]
        return Step(id, h, f"d_W_{src[2:].upper()}", f"d_W_{src[2:].upper()} = {xname}ᵀ·{name}",
                    (Operand(f"{xname}ᵀ", (len(x[0]), len(x))), Operand(name, (len(x), len(g[0])))), "·",
                    eb.grads_exact(out), dims("r", len(x[0])), dims("d", len(g[0])),
                    **(_kv_tags(ex, h) if src != "d_q" else {}))  # type: ignore[arg-type]

    return build


def _d_b(id: str) -> Callable[[Build, int | None], Step]:
    src = {"d_b_q": "d_q", "d_b_k": "d_k", "d_b_v": "d_v"}[id]

    def build(bd: Build, h: int | None) -> Step:
        ex = bd.ex
        g = cast(eb.Grads, bd.data[src, h])[_new_rows(ex, src)]  # with a KV cache b_K, b_V reach the new rows only
        letter = src[2:].upper()
        step = _bias_step(id, f"d_b_{letter}", src, f"d_{letter}{_rows_note(ex, src)}", g, dims("d", len(g[0])), h, len(g))
        return replace(step, **_kv_tags(ex, h)) if src != "d_q" else step  # type: ignore[arg-type]

    return build


def _product(a: Callable[[Solution, Step], _M], b: Callable[[Solution, Step], _M],
             scale: Callable[[Solution, Step], str] = lambda sol, step: "") -> Callable[[Solution, Step, int, int], str]:
    return lambda sol, step, i, j: _product_work(a(sol, step), b(sol, step), step, i, j, scale(sol, step))


def _proj_w(ex: Exercise, id: str, head: int | None) -> Sequence[Sequence[Fraction]]:
    hd = ex.heads[head or 0]
    return {"d_q": hd.w_q, "d_k": hd.w_k, "d_v": hd.w_v}[id]


# --- the inputs: d_x, d_x_kv ------------------------------------------------------------------------------


def _paths(ex: Exercise, id: str) -> tuple[str, ...]:
    return ("d_q",) if id == "d_x" and ex.is_cross else ("d_q", "d_k", "d_v") if id == "d_x" else ("d_k", "d_v")


def _terms(ex: Exercise, id: str) -> list[tuple[str, int]]:
    """The paths of ``d_x``/``d_x_kv`` as ``(source step, head)``: ``d_q`` of every head, then ``d_k``, ``d_v``
    once per K/V head (the first query head of each group holds the group's; every head without grouping)."""
    srcs = _paths(ex, id)
    out = [("d_q", h) for h in range(ex.num_heads) if "d_q" in srcs]
    kv_heads = [ex.sharing(g)[0] for g in range(ex.num_kv_heads)] if ex.grouped else range(ex.num_heads)
    if not ex.grouped:  # v1: head by head, d_q, d_k, d_v of each
        return [(src, h) for h in range(ex.num_heads) for src in srcs]
    return out + [(src, h) for h in kv_heads for src in srcs if src != "d_q"]


def _in_formula(ex: Exercise, id: str) -> str:
    """``d_X = Σ_h (d_Q·W_Qᵀ + d_K·W_Kᵀ + d_V·W_Vᵀ)``; grouped K/V heads ``Σ_h d_Q·W_Qᵀ + Σ_g (…)``; a cache ``d_K[new rows]``."""
    name = "d_X" if id == "d_x" else "d_X_kv"
    srcs = _paths(ex, id)
    text = {s: f"d_{s[2:].upper()}{_rows_note(ex, s)}·W_{s[2:].upper()}ᵀ" for s in srcs}
    if not ex.grouped:
        group = " + ".join(text[s] for s in srcs)
        return f"{name} = Σ_h ({group})" if ex.num_heads > 1 else f"{name} = {group}"
    q = ("Σ_h " + text["d_q"]) if "d_q" in srcs else ""
    kv = " + ".join(text[s] for s in srcs if s != "d_q")
    kv = f"Σ_g ({kv})" if ex.num_kv_heads > 1 else kv
    return f"{name} = " + " + ".join(p for p in (q, kv) if p)


def _d_in(id: str) -> Callable[[Build, int | None], Step]:
    def build(bd: Build, head: int | None) -> Step:
        ex = bd.ex
        x = ex.x if id == "d_x" else ex.kv  # step id: d_X is the gradient of X, d_X_kv of X_kv
        acc: eb.Grads = [[eb.GradSum() for _ in range(len(x[0]))] for _ in range(len(x))]
        for src, h in _terms(ex, id):  # [n, d]·[d, d_in]; with a cache the new rows of d_K, d_V
            eb.right_t(cast(eb.Grads, bd.data[src, h])[_new_rows(ex, src)], _proj_w(ex, src, h), acc)
        name = "d_X" if id == "d_x" else "d_X_kv"
        labels = ex.query_labels if id == "d_x" else ex.new_key_labels
        paths = tuple(Operand(f"d_{s[2:].upper()}·W_{s[2:].upper()}ᵀ", (len(x), len(x[0]))) for s in _paths(ex, id))
        return Step(id, None, name, _in_formula(ex, id), paths, "+",
                    eb.grads_exact(acc), labels, dims("d", len(x[0])))

    return build


def _d_in_work(sol: Solution, step: Step, i: int, j: int) -> str:
    ex = sol.exercise
    parts = []
    for src, h in _terms(ex, step.id):
        g, w = sol.step(src, h), _proj_w(ex, src, h)
        r = i + (ex.L_past if src in ("d_k", "d_v") else 0)  # with a cache row i of X is key row L_past + i
        parts.append(sum(g.value[r][c] * float(w[j][c]) for c in range(g.shape[1])))
    terms = " + ".join(_num(p) for p in parts)
    return f"{step.name}[{step.row_labels[i]}, {step.col_labels[j]}] = {terms} {total(step.exact[i][j], step.value[i][j])}"


# --- given ------------------------------------------------------------------------------------------------


def _givens(*keys: Callable[[Solution, Step], Key]) -> Callable[[Solution, Step], tuple[Input, ...]]:
    return lambda sol, step: tuple(given_step(sol.step(*k(sol, step))) for k in keys)


def _d_output_given(sol: Solution, step: Step) -> tuple[Input, ...]:
    """The forward pass's result, whose gradient the upstream is."""
    forward = [s for s in sol.steps if not s.id.startswith("d_")]
    return (given_step(forward[-1]),)


def _with_matrix(keys: Callable[[Solution, Step], tuple[Input, ...]], name: str,
                 m: Callable[[Exercise, int | None], Sequence[Sequence[Fraction]]]) -> Callable[[Solution, Step], tuple[Input, ...]]:
    def given(sol: Solution, step: Step) -> tuple[Input, ...]:
        mat = m(sol.exercise, step.head)
        return keys(sol, step) + (given_matrix(name, mat, dims("r", len(mat)), dims("d", len(mat[0]))),)

    return given


def _with_x(keys: Callable[[Solution, Step], tuple[Input, ...]], src: str) -> Callable[[Solution, Step], tuple[Input, ...]]:
    """The step's own inputs, and the X (or X_kv) the weights multiply, its rows labelled by token."""
    def given(sol: Solution, step: Step) -> tuple[Input, ...]:
        ex = sol.exercise
        mat = _x_of(src)(ex, step.head)
        name = "X" if src == "d_q" else _kv_name(ex)
        rows = ex.query_labels if src == "d_q" else ex.new_key_labels
        return keys(sol, step) + (given_matrix(name, mat, rows, dims("d", len(mat[0]))),)

    return given


def _x_of(src: str) -> Callable[[Exercise, int | None], Sequence[Sequence[Fraction]]]:
    return lambda ex, h: ex.x if src == "d_q" else ex.kv  # step id: W_Q multiplies X, W_K and W_V multiply X_kv


def _d_in_given(sol: Solution, step: Step) -> tuple[Input, ...]:
    ex = sol.exercise
    out = []
    for src, h in _terms(ex, step.id):
        w = _proj_w(ex, src, h)
        g, wm = given_step(sol.step(src, h)), given_matrix(f"W_{src[2:].upper()}", w, dims("r", len(w)), dims("d", len(w[0])))
        if ex.num_heads > 1:  # which head each pair is: its query head, or its K/V head when they are grouped
            suffix = (t("check.step_of_kv_head", step="", kv=ex.kv_head(h) + 1) if ex.grouped and src != "d_q"
                      else t("check.step_of_head", step="", head=h + 1))
            g, wm = replace(g, name=g.name + suffix), replace(wm, name=wm.name + suffix)
        out += [g, wm]
    return tuple(out)


def _group_givens(*ids: str) -> Callable[[Solution, Step], tuple[Input, ...]]:
    """Each head of the group's ``ids`` (one head without grouping), named by head when there are several."""
    def given(sol: Solution, step: Step) -> tuple[Input, ...]:
        group = _group(sol.exercise, step.head)
        out = []
        for h in group:
            for id in ids:
                inp = given_step(sol.step(id, h))
                named = len(group) > 1 and not inp.name.endswith(f"_{h + 1}")  # d_head_2 says its head already
                out.append(replace(inp, name=inp.name + t("check.step_of_head", step="", head=h + 1)) if named else inp)
        return tuple(out)

    return given


def _kv_grad_work(a: str, b: str, scaled: bool) -> Callable[[Solution, Step, int, int], str]:
    """``d_V = Σ_h weights_hᵀ·d_head_h``, ``d_K = Σ_h d_scaled_hᵀ·Q_h / √d_k``: one product per head of the group."""
    def work(sol: Solution, step: Step, i: int, j: int) -> str:
        ex = sol.exercise
        group = _group(ex, step.head)
        scale = _sqrt_dk(ex, step.head) if scaled else ""
        if len(group) == 1:
            return _product_work(_step(sol, a, group[0]).T, _step(sol, b, group[0]), step, i, j, scale)
        bodies = []
        for h in group:
            A, B = _step(sol, a, h).T, _step(sol, b, h)
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


def _reaching(sol: Solution, src: str, head: int | None) -> _M:
    """``d_<src>`` as far as it reaches the weights: with a KV cache, the new tokens' rows of d_K and d_V."""
    m = _step(sol, src, head)
    rows = _new_rows(sol.exercise, src)
    if rows.start == 0:
        return m
    return _M(m.name + _rows_note(sol.exercise, src), m.exact[rows], m.value[rows])


def _default_why(step: Step, ex: Exercise) -> list[str]:
    return [t(f"step.{step.id}.why")]


def _kv_why(step: Step, ex: Exercise) -> list[str]:
    """A K/V gradient's why, and what grouped K/V heads and a KV cache change."""
    out = [t(f"step.{step.id}.why")]
    if ex.grouped and len(_group(ex, step.head)) > 1:
        out.append(t("step.d_kv.why.grouped", kv=ex.kv_head(step.head or 0) + 1,
                     heads=", ".join(str(h + 1) for h in _group(ex, step.head))))
    if ex.has_cache:
        what = {"d_k": "keys", "d_v": "values"}.get(step.id)  # step id: d_K's rows are keys, d_V's values
        out.append(t("step.d_kv.why.cache", L_past=ex.L_past, what=what) if what
                   else t("step.d_kv.why.cache_weights", L_past=ex.L_past))
    return out


def _d_head_why(step: Step, ex: Exercise) -> list[str]:
    src = _d_head_source(ex)[0]
    return [t("step.d_head_output.why" if ex.num_heads > 1 else "step.d_head_output.why.single", src=src)]


def _d_b_why(step: Step, ex: Exercise) -> list[str]:
    out = _kv_why(step, ex)
    if step.id == "d_b_k" and not ex.has_cache:  # step id: only b_K's gradient vanishes (the softmax's shift)
        out.append(t("step.d_b_k.why.zero"))
    return out


def _d_scaled_why(step: Step, ex: Exercise) -> list[str]:
    out = [t("step.d_scaled.why")]
    if ex.has_bias:
        out.append(t("step.d_scaled.why.bias"))
    return out


# --- the kinds --------------------------------------------------------------------------------------------


def _has_w_o(ex: Exercise) -> bool:
    return ex.w_o is not None


def _own(id: str) -> Callable[[Solution, Step], Key]:
    return lambda sol, step: (id, step.head)


def _layer(id: str) -> Callable[[Solution, Step], Key]:
    return lambda sol, step: (id, None)


_SCALED = frozenset({"softmax_grad", "masked_grad"})

D_OUTPUT = StepKind(
    id="d_output", scope="layer", op="=", exists=always, inputs=lambda ex, head: (),
    build=_d_output, work=lambda sol, step, i, j: f"upstream[{step.row_labels[i]}, {step.col_labels[j]}] "
                                                    f"{total(step.exact[i][j], step.value[i][j])}",
    given=_d_output_given, latex=r"d_{\text{output}} = \frac{\partial L}{\partial\, \text{output}}", backward=True,
)
D_CONCAT = StepKind(
    id="d_concat", scope="layer", op="·", exists=_has_w_o, inputs=lambda ex, head: (("d_output", None),),
    build=_d_concat,
    work=_product(lambda sol, step: _step(sol, "d_output", None),
                  lambda sol, step: _given("W_Oᵀ", tuple(zip(*cast(Sequence[Sequence[Fraction]], sol.exercise.w_o))))),
    given=_with_matrix(_givens(_layer("d_output")), "W_O", lambda ex, h: cast(Sequence[Sequence[Fraction]], ex.w_o)),
    latex=r"d_{\text{concat}} = d_{\text{output}}\, W_O^\top", backward=True,
)
D_W_O = StepKind(
    id="d_w_o", scope="layer", op="·", exists=_has_w_o, inputs=lambda ex, head: (_heads_key(ex), ("d_output", None)),
    build=_d_w_o, work=_product(lambda sol, step: _step(sol, *_heads_key(sol.exercise)).T,
                                lambda sol, step: _step(sol, "d_output", None)),
    given=_givens(lambda sol, step: _heads_key(sol.exercise), _layer("d_output")),
    latex=r"d_{W_O} = \text{concat}^\top d_{\text{output}}", backward=True,
)
D_B_O = StepKind(
    id="d_b_o", scope="layer", op="Σ", exists=lambda ex: ex.b_o is not None, inputs=lambda ex, head: (("d_output", None),),
    build=_d_b_o, work=_bias_work, given=_givens(_layer("d_output")), varies=frozenset({"bias_grad"}),
    latex=r"d_{b_O} = \textstyle\sum_{\text{rows}} d_{\text{output}}", backward=True,
)
D_HEAD_OUTPUT = StepKind(
    id="d_head_output", scope="head", op="=", exists=always, inputs=lambda ex, head: (_d_head_source(ex),),
    build=_d_head_output, work=_d_head_output_work, why=_d_head_why,
    given=_givens(lambda sol, step: _d_head_source(sol.exercise)), names_head=True,
    latex=r"d_{\text{head}_{$head}} = $op0[:, \text{head } $head]", backward=True,
)
D_WEIGHTS = StepKind(
    id="d_weights", scope="head", op="·", exists=always, inputs=lambda ex, head: (("d_head_output", head), ("v", head)),
    build=_d_weights, work=_product(lambda sol, step: _step(sol, "d_head_output", step.head),
                                    lambda sol, step: _step(sol, "v", step.head).T),
    given=_givens(_own("d_head_output"), _own("v")), latex=r"d_{\text{weights}} = d_{\text{head}}\, V^\top",
    backward=True,
)
D_SCALED = StepKind(
    id="d_scaled", scope="head", op="∘", exists=always, inputs=lambda ex, head: (("weights", head), ("d_weights", head)),
    build=_d_scaled, work=_d_scaled_work, given=_givens(_own("weights"), _own("d_weights")), varies=_SCALED,
    fixed_by_mask=0.0, backward=True, why=_d_scaled_why,
    latex=r"d_{\text{scaled}} = P \circ \big(d_{\text{weights}} - \mathrm{rowsum}(d_{\text{weights}} \circ P)\big)",
)
D_V = StepKind(
    id="d_v", scope="head", op="·", exists=always,
    inputs=lambda ex, head: tuple((id, h) for h in _group(ex, head) for id in ("weights", "d_head_output")),
    build=_d_v, work=_kv_grad_work("weights", "d_head_output", scaled=False), varies=frozenset({"kv_grad"}),
    given=_group_givens("weights", "d_head_output"), latex=r"d_V = $sigma\text{weights}$h^\top d_{\text{head}$h}",
    backward=True, per_kv_head=True, why=_kv_why,
)
D_Q = StepKind(
    id="d_q", scope="head", op="·", exists=always, inputs=lambda ex, head: (("d_scaled", head), ("k", head)),
    build=_d_qk("d_q"), varies=frozenset({"grad_scale"}),
    work=_product(lambda sol, step: _step(sol, "d_scaled", step.head), lambda sol, step: _step(sol, "k", step.head),
                  lambda sol, step: _sqrt_dk(sol.exercise, step.head)),
    given=_givens(_own("d_scaled"), _own("k")), latex=r"d_Q = \frac{d_{\text{scaled}}\, K}{\sqrt{$d_k}}", backward=True,
)
D_K = StepKind(
    id="d_k", scope="head", op="·", exists=always,
    inputs=lambda ex, head: tuple((id, h) for h in _group(ex, head) for id in ("d_scaled", "q")),
    build=_d_qk("d_k"), varies=frozenset({"grad_scale", "d_k_transposed", "kv_grad"}),
    work=_kv_grad_work("d_scaled", "q", scaled=True),
    given=_group_givens("d_scaled", "q"), latex=r"d_K = $sigma\frac{d_{\text{scaled}$h}^\top Q$h}{\sqrt{$d_k}}", backward=True,
    per_kv_head=True, why=_kv_why,
)


def _d_w_kind(id: str) -> StepKind:
    src = {"d_w_q": "d_q", "d_w_k": "d_k", "d_w_v": "d_v"}[id]
    letter = src[2:].upper()
    return StepKind(
        id=id, scope="head", op="·", exists=always, inputs=lambda ex, head: ((src, head),), build=_d_w(id),
        work=_product(lambda sol, step: _given("X" if src == "d_q" else _kv_name(sol.exercise),
                                               _x_of(src)(sol.exercise, step.head)).T,
                      lambda sol, step: _reaching(sol, src, step.head)),
        given=_with_x(_givens(_own(src)), src),
        latex=rf"d_{{W_{letter}}} = X^\top d_{letter}" + ("" if src == "d_q" else "$new"), backward=True, per_kv_head=src != "d_q",
        why=_kv_why if src != "d_q" else _default_why,
    )


def _d_b_kind(id: str) -> StepKind:
    src = {"d_b_q": "d_q", "d_b_k": "d_k", "d_b_v": "d_v"}[id]
    field = id[2:]
    return StepKind(
        id=id, scope="head", op="Σ", exists=lambda ex: any(getattr(hd, field) is not None for hd in ex.heads),
        inputs=lambda ex, head: ((src, head),), build=_d_b(id), work=_bias_work, given=_givens(_own(src)),
        varies=frozenset({"bias_grad"}), latex=rf"d_{{b_{src[2:].upper()}}} = \textstyle\sum_{{\text{{rows}}}} d_{src[2:].upper()}" + ("" if src == "d_q" else "$new"),
        backward=True, per_kv_head=src != "d_q", why=_d_b_why if src != "d_q" else _default_why,
    )


D_W_Q, D_W_K, D_W_V = _d_w_kind("d_w_q"), _d_w_kind("d_w_k"), _d_w_kind("d_w_v")
D_B_Q, D_B_K, D_B_V = _d_b_kind("d_b_q"), _d_b_kind("d_b_k"), _d_b_kind("d_b_v")

D_X = StepKind(
    id="d_x", scope="layer", op="+", exists=always,
    inputs=lambda ex, head: tuple(_terms(ex, "d_x")),
    build=_d_in("d_x"), work=_d_in_work, given=_d_in_given, backward=True, late=True,
    latex=r"d_X = \textstyle\sum_h d_Q W_Q^\top \,(+\, d_K W_K^\top + d_V W_V^\top)",
)
D_X_KV = StepKind(
    id="d_x_kv", scope="layer", op="+", exists=lambda ex: ex.is_cross,
    inputs=lambda ex, head: tuple(_terms(ex, "d_x_kv")),
    build=_d_in("d_x_kv"), work=_d_in_work, given=_d_in_given, backward=True, late=True,
    latex=r"d_{X_{kv}} = \textstyle\sum_h d_K W_K^\top + d_V W_V^\top",
)

#: The backward kinds in the contract's order (layer steps before the heads, the heads', then d_x, d_x_kv).
BACKWARD: tuple[StepKind, ...] = (D_OUTPUT, D_CONCAT, D_W_O, D_B_O, D_HEAD_OUTPUT, D_WEIGHTS, D_SCALED, D_V, D_Q, D_K,
                                  D_W_Q, D_W_K, D_W_V, D_B_Q, D_B_K, D_B_V, D_X, D_X_KV)

