"""Multi-head latent attention (format v3, ``mla:``): the latent ``c_KV`` and the absorbed route to the scores.

DeepSeek-AI 2024, "DeepSeek-V2", §2.1.2 (in the row-vector convention of
hand calculation): each key token is projected once to a latent
``c_KV = X_kv·W_DKV`` ``[L_k, d_c]``, shared by every head; head ``h``
up-projects its keys and values from it, ``K_h = c_KV·W_UK_h`` and
``V_h = c_KV·W_UV_h`` (the ``k`` and ``v`` kinds of
:mod:`tutor.steps.projection` read ``c_kv`` then).  Only ``c_KV`` is cached.

The absorbed route: ``scores_h = Q_h·K_hᵀ = Q_h·(c_KV·W_UK_h)ᵀ =
(Q_h·W_UK_hᵀ)·c_KVᵀ``, so ``W_UK`` can be absorbed into the query side
(``q_absorbed = Q_h·W_UK_hᵀ``, ``[L, d_c]``) and the scores read off the
cached latent without forming K (``scores_absorbed = q_absorbed·c_KVᵀ``);
the paper absorbs ``W_UK`` into ``W_Q`` and ``W_UV`` into ``W_O``.  The exact
engine checks that the absorbed scores equal ``Q·Kᵀ`` entry by entry, as
rationals (:class:`~tutor.base.errors.EngineMismatchError` otherwise); the
scaled scores read the absorbed ones, as an inference kernel does.

Each kind's engines, side by side: the exact build (:class:`tutor.exact.engine.QMat`
on integers), the float walk and its slack, the batched run's reading
(:func:`tutor.production.run.run_latent`) and its float64 rounding bound,
and the exact walk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base.errors import EngineMismatchError
from ..base.messages import Msg, Text
from ..exact import engine as exact
from ..exact import matrices as em
from ..exercise.record import Exercise, Latent
from .kind import StepKind, dims, given_matrix, given_step
from .records import Key, Operand, Solution, Step
from .rounding import gamma, magnitude
from .state import Build, ExactWalk, Replay, floats, mul_slack
from .worked import Worked, dot, entry_products, factor, total

if TYPE_CHECKING:
    import numpy as np

    from ..numeric.layer import LayerRun
    from .rounding import Array
else:
    from ..base.lazy import numpy as np


def has_latent(ex: Exercise) -> bool:
    """Whether ``ex`` has multi-head latent attention's K/V side (its ``mla``)."""
    return ex.mla is not None


def latent(ex: Exercise) -> Latent:
    """The exercise's latent (``mla``); only for an exercise that has one."""
    assert ex.mla is not None
    return ex.mla


def cache_sizes(ex: Exercise) -> tuple[int, int]:
    """Numbers cached per token and layer: ``(d_c, num_heads·(d_k + d_v))``, MLA's latent against multi-head
    attention's K and V with the same heads (DeepSeek-V2, §2.1.4, Table 1: ``d_c`` (+ the RoPE key's width) against
    ``2·n_h·d_h``)."""
    return latent(ex).d_c, sum(h.d_k + h.d_v for h in ex.heads)


# --- c_kv: X_kv·W_DKV (layer, before the heads) --------------------------------------------------------


def _src(ex: Exercise) -> str:
    return "X_kv" if ex.is_cross else "X"


def _c_kv(bd: Build, head: int | None) -> Step:
    ex = bd.ex
    w = latent(ex).w_dkv
    m = exact.project(ex.kv, w, None)  # [L_k, d_kv]·[d_kv, d_c] -> [L_k, d_c]
    bd.data["c_kv", None] = m
    src = _src(ex)
    ops = (Operand(src, (len(ex.kv), len(ex.kv[0]))), Operand("W_DKV", (len(w), len(w[0]))))
    return Step("c_kv", None, "c_KV", f"c_KV = {src}·W_DKV", ops, "·", m.exact(), ex.new_key_labels,
                dims("c", len(w[0])))


def _c_kv_work(sol: Solution, step: Step, i: int, j: int) -> str:
    ex = sol.exercise
    x, w = ex.kv, latent(ex).w_dkv
    pairs = [(factor(x[i][k], float(x[i][k])), factor(w[k][j], float(w[k][j]))) for k in range(len(w))]
    return (f"{_src(ex)}[{step.row_labels[i]}, :]·W_DKV[:, {step.col_labels[j]}] = {dot(pairs)} "
            f"{total(step.exact[i][j], step.value[i][j])}")


def _c_kv_arithmetic(sol: Solution, step: Step, places: int) -> tuple[Worked, ...]:
    ex = sol.exercise
    x, w = ex.kv, latent(ex).w_dkv

    def pairs_of(i: int, j: int, places: int) -> tuple[list[tuple[str, str]], str]:
        return [(factor(x[i][k], float(x[i][k]), places), factor(w[k][j], float(w[k][j]), places))
                for k in range(len(w))], ""

    return entry_products(step, pairs_of, places)


def _c_kv_given(sol: Solution, step: Step) -> tuple:
    ex = sol.exercise
    w = latent(ex).w_dkv
    return (given_matrix(_src(ex), ex.kv, ex.new_key_labels, dims("d", len(ex.kv[0]))),
            given_matrix("W_DKV", w, dims("r", len(w)), dims("c", len(w[0]))))


def _c_kv_why(step: Step, ex: Exercise) -> list[Text]:
    d_c, mha = cache_sizes(ex)
    h0 = ex.heads[0]
    same = all(h.d_k == h0.d_k and h.d_v == h0.d_v for h in ex.heads)
    out: list[Text] = [Msg("step.c_kv.why")]
    if same:
        out.append(Msg("step.c_kv.why.cache", d_c=d_c, H=ex.num_heads, d_k=h0.d_k, d_v=h0.d_v, mha=mha,
                     ratio=f"{mha / d_c:g}"))
    else:
        out.append(Msg("step.c_kv.why.cache.mixed", d_c=d_c, mha=mha, ratio=f"{mha / d_c:g}"))
    out.append(Msg("step.c_kv.why.same", d_c=d_c, mha=mha))  # a mistake of memory, not of numbers
    out.append(Msg("step.c_kv.why.rope"))
    return out


def _c_kv_floats(r: Replay, head: int | None) -> Array:
    """``X_kv·W_DKV`` ``[L_k, d_c]``."""
    return r.kv @ floats(latent(r.ex).w_dkv)  # [L_k, d_kv]·[d_kv, d_c] -> [L_k, d_c]


def _c_kv_slack(r: Replay, head: int | None) -> Array:
    return np.zeros_like(r.value(("c_kv", None)))  # projected from the exercise: exact inputs


def _c_kv_production(run: LayerRun, ex: Exercise, head: int | None) -> Array:
    assert run.c_kv is not None  # a run of an exercise with mla (run_latent)
    return run.c_kv


def _c_kv_rounding(r: Replay, head: int | None) -> Array:
    ex = r.ex
    return gamma(len(ex.kv[0]) + 3) * (magnitude(ex.kv) @ magnitude(latent(ex).w_dkv))  # [L_k, d_c]


def _c_kv_exact(w: ExactWalk, head: int | None) -> em.Matrix:
    m = exact.project(w.ex.kv, latent(w.ex).w_dkv, None)  # [L_k, d_c], on integers (QMat)
    w.qmats["c_kv", None] = m
    return [list(row) for row in m.fractions()]


C_KV = StepKind(
    id="c_kv", scope="layer", op="·", exists=has_latent, inputs=lambda ex, head: (),
    build=_c_kv, floats=_c_kv_floats, slack=_c_kv_slack, production=_c_kv_production, rounding=_c_kv_rounding,
    exact_walk=_c_kv_exact, work=_c_kv_work, arithmetic=_c_kv_arithmetic, given=_c_kv_given, why=_c_kv_why,
    latex=r"c_{KV} = X W_{DKV}", advanced=True, early=True,
)


# --- q_absorbed: Q·W_UKᵀ (per head) ------------------------------------------------------------------------


def _w_uk(ex: Exercise, head: int | None):
    return latent(ex).w_uk[head or 0]  # [d_c, d_k]


def _q_absorbed_inputs(ex: Exercise, head: int | None) -> tuple[Key, ...]:
    return (("q", head),)


def _q_absorbed(bd: Build, h: int | None) -> Step:
    ex = bd.ex
    (Q,) = bd.inputs(Q_ABSORBED, h)
    assert isinstance(Q, exact.QMat)
    w = _w_uk(ex, h)
    m = Q @ exact.QMat.of(w).T  # [L, d_k]·[d_k, d_c] -> [L, d_c]
    bd.data["q_absorbed", h] = m
    ops = (Operand("Q", Q.shape), Operand("W_UKᵀ", (len(w[0]), len(w))))
    return Step("q_absorbed", h, "Q_abs", "Q_abs = Q·W_UKᵀ", ops, "·", m.exact(), ex.query_labels,
                dims("c", len(w)))


def _q_absorbed_work(sol: Solution, step: Step, i: int, j: int) -> str:
    q, w = sol.step("q", step.head), _w_uk(sol.exercise, step.head)
    pairs = [(factor(q.exact[i][n], q.value[i][n]), factor(w[j][n], float(w[j][n]))) for n in range(q.shape[1])]
    return (f"Q[{step.row_labels[i]}, :]·W_UK[{step.col_labels[j]}, :] = {dot(pairs)} "
            f"{total(step.exact[i][j], step.value[i][j])}")


def _q_absorbed_arithmetic(sol: Solution, step: Step, places: int) -> tuple[Worked, ...]:
    q, w = sol.step("q", step.head), _w_uk(sol.exercise, step.head)

    def pairs_of(i: int, j: int, places: int) -> tuple[list[tuple[str, str]], str]:
        return [(factor(q.exact[i][n], q.value[i][n], places), factor(w[j][n], float(w[j][n]), places))
                for n in range(q.shape[1])], ""

    return entry_products(step, pairs_of, places)


def _q_absorbed_given(sol: Solution, step: Step) -> tuple:
    w = _w_uk(sol.exercise, step.head)
    return (given_step(sol.step("q", step.head)), given_matrix("W_UK", w, dims("c", len(w)), dims("d", len(w[0]))))


def _q_absorbed_why(step: Step, ex: Exercise) -> list[Text]:
    return [Msg("step.q_absorbed.why"), Msg("step.q_absorbed.why.rope")]


def _q_absorbed_floats(r: Replay, head: int | None) -> Array | None:
    """``Q·W_UKᵀ`` ``[L, d_c]`` (``Q·W_UK`` under ``uk_untransposed``, when the shapes chain: ``d_k = d_c``)."""
    (Q,) = r.inputs(Q_ABSORBED, head)
    if Q is None:
        return None
    W = floats(_w_uk(r.ex, head))  # [d_c, d_k]
    if r.variant.uk_untransposed:
        return Q @ W if W.shape[0] == Q.shape[1] else None  # [L, d_k]·[d_c, d_k]: only when d_c = d_k
    return Q @ W.T  # [L, d_k]·[d_k, d_c] -> [L, d_c]


def _q_absorbed_slack(r: Replay, head: int | None) -> Array:
    (q,) = _q_absorbed_inputs(r.ex, head)
    return r.delta(*q) @ magnitude(_w_uk(r.ex, head)).T  # [L, d_k]·[d_k, d_c]


def _q_absorbed_production(run: LayerRun, ex: Exercise, head: int | None) -> Array:
    assert run.q_absorbed is not None
    return run.q_absorbed[head]


def _q_absorbed_rounding(r: Replay, head: int | None) -> Array:
    (q,) = _q_absorbed_inputs(r.ex, head)
    W = magnitude(_w_uk(r.ex, head)).T  # [d_k, d_c]
    Q = np.abs(r.value(q))
    return r.delta(*q) @ W + gamma(W.shape[0] + 2) * (Q @ W)  # Q's error carried, plus the dot products'


def _q_absorbed_exact(w: ExactWalk, head: int | None) -> em.Matrix | None:
    Q = w.qmats.get(("q", head))  # the exact engine's integers: never rounded
    if Q is None:
        return None
    W = exact.QMat.of(_w_uk(w.ex, head))  # [d_c, d_k]
    if w.variant.uk_untransposed:
        if W.shape[0] != Q.shape[1]:
            return None
        m = Q @ W
    else:
        m = Q @ W.T  # [L, d_c]
    w.qmats["q_absorbed", head] = m
    return [list(row) for row in m.fractions()]


Q_ABSORBED = StepKind(
    id="q_absorbed", scope="head", op="·", exists=has_latent, inputs=_q_absorbed_inputs,
    build=_q_absorbed, floats=_q_absorbed_floats, slack=_q_absorbed_slack, production=_q_absorbed_production,
    rounding=_q_absorbed_rounding, exact_walk=_q_absorbed_exact, varies=frozenset({"uk_untransposed"}),
    work=_q_absorbed_work, arithmetic=_q_absorbed_arithmetic, given=_q_absorbed_given, why=_q_absorbed_why,
    latex=r"Q_{\mathrm{abs}} = Q W_{UK}^\top", advanced=True,
)


# --- scores_absorbed: Q_abs·c_KVᵀ (per head), checked equal to Q·Kᵀ ----------------------------------------


def _scores_absorbed_inputs(ex: Exercise, head: int | None) -> tuple[Key, ...]:
    """``q_absorbed`` and ``c_kv`` it is computed from, then ``scores``, which it is checked equal to."""
    return (("q_absorbed", head), ("c_kv", None), ("scores", head))


def _scores_absorbed(bd: Build, h: int | None) -> Step:
    ex = bd.ex
    qa, c, explicit = bd.inputs(SCORES_ABSORBED, h)
    assert isinstance(qa, exact.QMat) and isinstance(c, exact.QMat) and isinstance(explicit, exact.QMat)
    S = qa @ c.T  # [L, d_c]·[d_c, L_k] -> [L, L_k]
    if S.fractions() != explicit.fractions():  # (Q·W_UKᵀ)·c_KVᵀ = Q·(c_KV·W_UK)ᵀ: a difference is a bug
        raise EngineMismatchError(Msg("step.scores_absorbed.differs", id=ex.id, head=(h or 0) + 1))
    bd.data["scores_absorbed", h] = S
    ops = (Operand("Q_abs", qa.shape), Operand("c_KVᵀ", (c.shape[1], c.shape[0])))
    return Step("scores_absorbed", h, "scores_abs", "scores_abs = Q_abs·c_KVᵀ", ops, "·", S.exact(), ex.query_labels,
                ex.key_labels)


def _scores_absorbed_work(sol: Solution, step: Step, i: int, j: int) -> str:
    qa, c = sol.step("q_absorbed", step.head), sol.step("c_kv", None)
    pairs = [(factor(qa.exact[i][n], qa.value[i][n]), factor(c.exact[j][n], c.value[j][n])) for n in range(qa.shape[1])]
    return (f"Q_abs[{step.row_labels[i]}, :]·c_KV[{step.col_labels[j]}, :] = {dot(pairs)} "
            f"{total(step.exact[i][j], step.value[i][j])}")


def _scores_absorbed_arithmetic(sol: Solution, step: Step, places: int) -> tuple[Worked, ...]:
    qa, c = sol.step("q_absorbed", step.head), sol.step("c_kv", None)

    def pairs_of(i: int, j: int, places: int) -> tuple[list[tuple[str, str]], str]:
        return [(factor(qa.exact[i][n], qa.value[i][n], places), factor(c.exact[j][n], c.value[j][n], places))
                for n in range(qa.shape[1])], ""

    return entry_products(step, pairs_of, places)


def _scores_absorbed_why(step: Step, ex: Exercise) -> list[Text]:
    return [Msg("step.scores_absorbed.why"), Msg("step.scores_absorbed.why.equal", head=(step.head or 0) + 1)]


def _scores_absorbed_floats(r: Replay, head: int | None) -> Array | None:
    """``Q_abs·c_KVᵀ`` ``[L, L_k]`` (``c_KV·Q_absᵀ`` ``[L_k, L]`` under ``kq``, as the explicit scores)."""
    qa, c, _ = r.inputs(SCORES_ABSORBED, head)
    if qa is None or c is None or qa.shape[1] != c.shape[1]:
        return None
    return c @ qa.T if r.variant.kq else qa @ c.T  # [L, d_c]·[d_c, L_k] -> [L, L_k]


def _scores_absorbed_slack(r: Replay, head: int | None) -> Array:
    qa, c, _ = _scores_absorbed_inputs(r.ex, head)
    return mul_slack(r.value(qa), r.delta(*qa), r.value(c).T, r.delta(*c).T)


def _scores_absorbed_production(run: LayerRun, ex: Exercise, head: int | None) -> Array:
    assert run.scores_absorbed is not None
    return run.scores_absorbed[head]


def _scores_absorbed_rounding(r: Replay, head: int | None) -> Array:
    qa, c, _ = _scores_absorbed_inputs(r.ex, head)
    A, C = np.abs(r.value(qa)), np.abs(r.value(c))
    e_a, e_c = r.delta(*qa), r.delta(*c)
    return e_a @ C.T + A @ e_c.T + e_a @ e_c.T + gamma(A.shape[1] + 2) * (A @ C.T)  # [L, L_k]


def _scores_absorbed_exact(w: ExactWalk, head: int | None) -> em.Matrix | None:
    qa, c = w.qmats.get(("q_absorbed", head)), w.qmats.get(("c_kv", None))  # integers: never rounded
    if qa is None or c is None or qa.shape[1] != c.shape[1]:
        return None
    S = c @ qa.T if w.variant.kq else qa @ c.T
    return [list(row) for row in S.fractions()]


SCORES_ABSORBED = StepKind(
    id="scores_absorbed", scope="head", op="·", exists=has_latent, inputs=_scores_absorbed_inputs,
    build=_scores_absorbed, floats=_scores_absorbed_floats, slack=_scores_absorbed_slack,
    production=_scores_absorbed_production, rounding=_scores_absorbed_rounding, exact_walk=_scores_absorbed_exact,
    varies=frozenset({"kq"}), work=_scores_absorbed_work, arithmetic=_scores_absorbed_arithmetic,
    given=lambda sol, step: (given_step(sol.step("q_absorbed", step.head)), given_step(sol.step("c_kv", None))),
    why=_scores_absorbed_why, latex=r"\text{scores}_{\mathrm{abs}} = Q_{\mathrm{abs}} c_{KV}^\top", axes_note=True,
    advanced=True,
)

#: The latent's kinds: ``c_kv`` (the layer's, before the heads), then each head's absorbed route.
LATENT: tuple[StepKind, ...] = (C_KV, Q_ABSORBED, SCORES_ABSORBED)
