"""The backward pass, step by step: the gradient of every matrix, from the upstream gradient back to X.

The chain rule through ``output = concat·W_O + b_O`` and, per head,
``head = weights·V``, ``weights = softmax(scaled)``, ``scaled = Q·Kᵀ/√d_k``,
``Q = X·W_Q + b_Q``, ``K = X_kv·W_K + b_K``, ``V = X_kv·W_V + b_V`` (Vaswani
et al. 2017, eq. 1 and §3.2.2; the softmax's gradient ``d_scaled = weights ∘
(d_weights − rowsum(d_weights ∘ weights))`` as in Dao 2023,
FlashAttention-2, Algorithm 2).  ``d_<m>`` is ``∂L/∂<m>`` for the loss whose
gradient at the output is ``upstream`` (all ones by default).  The exact
math is :mod:`tutor.exact_backward`; the float steps
:mod:`tutor.numeric.replay_backward`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import cast

from .. import exact_backward as eb
from ..decimals import fixed
from ..exact import QMat
from ..exactnum import Exact, SoftmaxRow
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
    src = sol.step(*_bias_source(sol.exercise, step))
    parts = " + ".join(factor(src.exact[r][j], src.value[r][j]) for r in range(src.shape[0]))
    return f"Σ_rows {src.name}[:, {step.col_labels[j]}] = {parts} {total(step.exact[i][j], step.value[i][j])}"


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
    rows = cast("tuple[SoftmaxRow, ...]", bd.data["weights", h])
    dH = cast(eb.Rational, bd.data["d_head_output", h])
    g = eb.d_v(rows, dH, ex.L_k)  # [L_k, L]·[L, d_v] -> [L_k, d_v]
    bd.data["d_v", h] = g
    name = f"d_head_{(h or 0) + 1}"
    d_v = ex.heads[h or 0].d_v
    return Step("d_v", h, "d_V", f"d_V = weightsᵀ·{name}", (Operand("weightsᵀ", (ex.L_k, ex.L)), Operand(name, (ex.L, d_v))),
                "·", eb.grads_exact(g), ex.key_labels, dims("d", d_v))


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
            g = eb.d_k(rows, dP, cast(QMat, bd.data["q", h]), d_k, ex.L_k)  # [L_k, L]·[L, d_k] -> [L_k, d_k]
            ops = (Operand("d_scaledᵀ", (ex.L_k, ex.L)), Operand("Q", (ex.L, d_k)))
            formula, labels = "d_K = d_scaledᵀ·Q / √d_k", ex.key_labels
        bd.data[id, h] = g
        return Step(id, h, "d_Q" if id == "d_q" else "d_K", formula, ops,
                    "·", eb.grads_exact(g), labels, dims("d", d_k))

    return build


def _d_w(id: str) -> Callable[[Build, int | None], Step]:
    src = {"d_w_q": "d_q", "d_w_k": "d_k", "d_w_v": "d_v"}[id]

    def build(bd: Build, h: int | None) -> Step:
        ex = bd.ex
        x = ex.x if src == "d_q" else ex.kv  # step id: W_Q multiplies X, W_K and W_V multiply X_kv
        g = cast(eb.Grads, bd.data[src, h])
        name, xname = "d_" + src[2:].upper(), "X" if src == "d_q" else _kv_name(ex)
        out = eb.left_t(x, g)  # [d_in, n]·[n, d] -> [d_in, d]
        return Step(id, h, f"d_W_{src[2:].upper()}", f"d_W_{src[2:].upper()} = {xname}ᵀ·{name}",
                    (Operand(f"{xname}ᵀ", (len(x[0]), len(x))), Operand(name, (len(x), len(g[0])))), "·",
                    eb.grads_exact(out), dims("r", len(x[0])), dims("d", len(g[0])))

    return build


def _d_b(id: str) -> Callable[[Build, int | None], Step]:
    src = {"d_b_q": "d_q", "d_b_k": "d_k", "d_b_v": "d_v"}[id]

    def build(bd: Build, h: int | None) -> Step:
        g = cast(eb.Grads, bd.data[src, h])
        letter = src[2:].upper()
        return _bias_step(id, f"d_b_{letter}", src, f"d_{letter}", g, dims("d", len(g[0])), h, len(g))

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


def _d_in(id: str) -> Callable[[Build, int | None], Step]:
    def build(bd: Build, head: int | None) -> Step:
        ex = bd.ex
        x = ex.x if id == "d_x" else ex.kv  # step id: d_X is the gradient of X, d_X_kv of X_kv
        acc: eb.Grads = [[eb.GradSum() for _ in range(len(x[0]))] for _ in range(len(x))]
        terms = []
        for h in range(ex.num_heads):
            for src in _paths(ex, id):
                eb.right_t(cast(eb.Grads, bd.data[src, h]), _proj_w(ex, src, h), acc)  # [n, d]·[d, d_in]
                terms.append(f"d_{src[2:].upper()}·W_{src[2:].upper()}ᵀ")
        sigma = "Σ_h " if ex.num_heads > 1 else ""
        group = " + ".join(dict.fromkeys(terms))
        name = "d_X" if id == "d_x" else "d_X_kv"
        labels = ex.query_labels if id == "d_x" else ex.key_labels
        return Step(id, None, name, f"{name} = {sigma}({group})" if sigma else f"{name} = {group}",
                    tuple(Operand(f"d_{s[2:].upper()}", ()) for s in _paths(ex, id)), "+",
                    eb.grads_exact(acc), labels, dims("d", len(x[0])))

    return build


def _d_in_work(sol: Solution, step: Step, i: int, j: int) -> str:
    ex = sol.exercise
    parts = []
    for h in range(ex.num_heads):
        for src in _paths(ex, step.id):
            g, w = sol.step(src, h), _proj_w(ex, src, h)
            parts.append(sum(g.value[i][c] * float(w[j][c]) for c in range(g.shape[1])))
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


def _x_of(src: str) -> Callable[[Exercise, int | None], Sequence[Sequence[Fraction]]]:
    return lambda ex, h: ex.x if src == "d_q" else ex.kv  # step id: W_Q multiplies X, W_K and W_V multiply X_kv


def _d_in_given(sol: Solution, step: Step) -> tuple[Input, ...]:
    ex = sol.exercise
    out = []
    for h in range(ex.num_heads):
        for src in _paths(ex, step.id):
            w = _proj_w(ex, src, h)
            out += [given_step(sol.step(src, h)),
                    given_matrix(f"W_{src[2:].upper()}", w, dims("r", len(w)), dims("d", len(w[0])))]
    return tuple(out)


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
    build=_d_head_output, work=_d_head_output_work,
    given=_givens(lambda sol, step: _d_head_source(sol.exercise)), names_head=True,
    latex=r"d_{\text{head}_{$head}} = d_{\text{concat}}[:, \text{head } $head]", backward=True,
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
    fixed_by_mask=0.0, backward=True,
    latex=r"d_{\text{scaled}} = P \circ \big(d_{\text{weights}} - \mathrm{rowsum}(d_{\text{weights}} \circ P)\big)",
)
D_V = StepKind(
    id="d_v", scope="head", op="·", exists=always, inputs=lambda ex, head: (("weights", head), ("d_head_output", head)),
    build=_d_v, work=_product(lambda sol, step: _step(sol, "weights", step.head).T,
                              lambda sol, step: _step(sol, "d_head_output", step.head)),
    given=_givens(_own("weights"), _own("d_head_output")), latex=r"d_V = \text{weights}^\top d_{\text{head}}",
    backward=True,
)
D_Q = StepKind(
    id="d_q", scope="head", op="·", exists=always, inputs=lambda ex, head: (("d_scaled", head), ("k", head)),
    build=_d_qk("d_q"), varies=frozenset({"grad_scale"}),
    work=_product(lambda sol, step: _step(sol, "d_scaled", step.head), lambda sol, step: _step(sol, "k", step.head),
                  lambda sol, step: _sqrt_dk(sol.exercise, step.head)),
    given=_givens(_own("d_scaled"), _own("k")), latex=r"d_Q = \frac{d_{\text{scaled}}\, K}{\sqrt{$d_k}}", backward=True,
)
D_K = StepKind(
    id="d_k", scope="head", op="·", exists=always, inputs=lambda ex, head: (("d_scaled", head), ("q", head)),
    build=_d_qk("d_k"), varies=frozenset({"grad_scale", "d_k_transposed"}),
    work=_product(lambda sol, step: _step(sol, "d_scaled", step.head).T, lambda sol, step: _step(sol, "q", step.head),
                  lambda sol, step: _sqrt_dk(sol.exercise, step.head)),
    given=_givens(_own("d_scaled"), _own("q")), latex=r"d_K = \frac{d_{\text{scaled}}^\top Q}{\sqrt{$d_k}}", backward=True,
)


def _d_w_kind(id: str) -> StepKind:
    src = {"d_w_q": "d_q", "d_w_k": "d_k", "d_w_v": "d_v"}[id]
    letter = src[2:].upper()
    return StepKind(
        id=id, scope="head", op="·", exists=always, inputs=lambda ex, head: ((src, head),), build=_d_w(id),
        work=_product(lambda sol, step: _given("X" if src == "d_q" else _kv_name(sol.exercise),
                                               _x_of(src)(sol.exercise, step.head)).T,
                      lambda sol, step: _step(sol, src, step.head)),
        given=_with_matrix(_givens(_own(src)), "X" if src == "d_q" else "X_kv", _x_of(src)),
        latex=rf"d_{{W_{letter}}} = X^\top d_{letter}", backward=True,
    )


def _d_b_kind(id: str) -> StepKind:
    src = {"d_b_q": "d_q", "d_b_k": "d_k", "d_b_v": "d_v"}[id]
    field = id[2:]
    return StepKind(
        id=id, scope="head", op="Σ", exists=lambda ex: any(getattr(hd, field) is not None for hd in ex.heads),
        inputs=lambda ex, head: ((src, head),), build=_d_b(id), work=_bias_work, given=_givens(_own(src)),
        varies=frozenset({"bias_grad"}), latex=rf"d_{{b_{src[2:].upper()}}} = \textstyle\sum_{{\text{{rows}}}} d_{src[2:].upper()}",
        backward=True,
    )


D_W_Q, D_W_K, D_W_V = _d_w_kind("d_w_q"), _d_w_kind("d_w_k"), _d_w_kind("d_w_v")
D_B_Q, D_B_K, D_B_V = _d_b_kind("d_b_q"), _d_b_kind("d_b_k"), _d_b_kind("d_b_v")

D_X = StepKind(
    id="d_x", scope="layer", op="+", exists=always,
    inputs=lambda ex, head: tuple((s, h) for h in range(ex.num_heads) for s in _paths(ex, "d_x")),
    build=_d_in("d_x"), work=_d_in_work, given=_d_in_given, backward=True, late=True,
    latex=r"d_X = \textstyle\sum_h d_Q W_Q^\top \,(+\, d_K W_K^\top + d_V W_V^\top)",
)
D_X_KV = StepKind(
    id="d_x_kv", scope="layer", op="+", exists=lambda ex: ex.is_cross,
    inputs=lambda ex, head: tuple((s, h) for h in range(ex.num_heads) for s in _paths(ex, "d_x_kv")),
    build=_d_in("d_x_kv"), work=_d_in_work, given=_d_in_given, backward=True, late=True,
    latex=r"d_{X_{kv}} = \textstyle\sum_h d_K W_K^\top + d_V W_V^\top",
)

#: The backward kinds in the contract's order (layer steps before the heads, the heads', then d_x, d_x_kv).
BACKWARD: tuple[StepKind, ...] = (D_OUTPUT, D_CONCAT, D_W_O, D_B_O, D_HEAD_OUTPUT, D_WEIGHTS, D_SCALED, D_V, D_Q, D_K,
                                  D_W_Q, D_W_K, D_W_V, D_B_Q, D_B_K, D_B_V, D_X, D_X_KV)

