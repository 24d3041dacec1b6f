"""The projections: ``Q = X·W_Q + b_Q``, ``K = X_kv·W_K + b_K``, ``V = X_kv·W_V + b_V`` (one per head).

Vaswani et al. 2017, §3.2.2 (``head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)``),
in the row-vector convention of hand calculation.  ``X_kv`` is ``X`` in
self-attention; in cross-attention K and V come from the other sequence.

Format v2: with grouped K/V heads (GQA, MQA) query head ``h`` reads K/V head
``h // (num_heads / num_kv_heads)`` (Ainslie et al. 2023; PyTorch's
``enable_gqa=True``), so the K and V of the heads of one group are the same
matrices.  With a KV cache, ``k_new``/``v_new`` project the new tokens and
``K = [K_cache; K_new]``, ``V = [V_cache; V_new]`` (the new rows appended).

Each kind's engines, side by side: the exact build (:func:`tutor.exact.engine.project`
on integers), the float walk (under a variant: biases dropped, grouped K/V
heads read in ``tile`` order, the heads split by a plain reshape, the cache
multiplied by W again), the batched layer's reading and its float64
rounding bound, and the exact walk.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

from ..base.messages import Msg, Text
from ..exact import engine as exact
from ..exact import matrices as em
from ..exact.numbers import Exact
from ..exercise.record import Exercise, Head, Matrix, Vector
from .kind import StepKind, always, dims, given_matrix, given_step
from .records import Key, Operand, Solution, Step
from .rounding import UNIT, gamma, magnitude
from .state import Build, ExactWalk, Replay, floats
from .worked import Worked, dot, entry_products, factor, total

if TYPE_CHECKING:
    import numpy as np

    from ..numeric.layer import LayerRun
    from .rounding import Array
else:
    from ..base.lazy import numpy as np


def _parts(ex: Exercise, id: str, head: int | None) -> tuple[Matrix, str, tuple[str, ...], Matrix, Vector | None]:
    """``(x, its name, its row labels, W, b)`` of projection ``id`` (``q``, ``k``, ``v``, ``k_new``, ``v_new``) of ``head``
    (with a norm, ``x`` is still ``X``: :func:`_read` gives what the projection reads, ``X_norm``)."""
    hd: Head = ex.heads[head or 0]  # with grouped K/V heads its w_k, w_v are those of K/V head ex.kv_head(head)
    w, b = {"q": (hd.w_q, hd.b_q), "k": (hd.w_k, hd.b_k), "v": (hd.w_v, hd.b_v)}[id[0]]
    if ex.has_norm:
        return ex.x, "X_norm", ex.query_labels, w, b
    if id == "q":
        return ex.x, "X", ex.query_labels, w, b
    return ex.kv, "X_kv" if ex.is_cross else "X", ex.new_key_labels, w, b


def _read(sol: Solution, x: Matrix) -> tuple[Sequence[Sequence[Exact | Fraction]], Sequence[Sequence[float]]]:
    """The entries a projection multiplies, exact and as floats: ``x``, or ``X_norm``'s with a norm."""
    if sol.exercise.has_norm:
        xs = sol.step("x_norm")
        return xs.exact, xs.value
    return x, [[float(e) for e in row] for row in x]


def _cached(ex: Exercise, id: str) -> bool:
    """True for ``k`` and ``v`` of an exercise with a KV cache: the cache with the new rows appended."""
    return id in ("k", "v") and ex.has_cache


def _kv(ex: Exercise, id: str, head: int | None) -> int | None:
    """The K/V head a K or V step of ``head`` belongs to, when K/V heads are grouped (else ``None``)."""
    return ex.kv_head(head or 0) if id != "q" and ex.grouped else None


def _kind(id: str) -> StepKind:
    sym = id.upper() if len(id) == 1 else f"{id[0].upper()}_new"  # Q, K, V, K_new, V_new
    wsym = id[0].upper()

    def build(bd: Build, head: int | None) -> Step:
        ex = bd.ex
        if _up(ex, id):
            return _up_build(bd, id, head)
        if _cached(ex, id):
            return _append(bd, id, head)
        x, src, rows, w, b = _parts(ex, id, head)
        m = exact.project(x, w, b)  # [n, d_in]·[d_in, d] -> [n, d]
        bd.data[id, head] = m
        ops: tuple[Operand, ...] = (Operand(src, (len(x), len(x[0]))), Operand(f"W_{wsym}", (len(w), len(w[0]))))
        formula = f"{sym} = {src}·W_{wsym}"
        if b is not None:
            ops += (Operand(f"b_{wsym}", (len(b),)),)
            formula += f" + b_{wsym}"
        return Step(id, head, sym, formula, ops, "·", m.exact(), rows, dims("d", len(w[0])), kv_head=_kv(ex, id, head),
                    shared=ex.sharing(ex.kv_head(head or 0)) if _kv(ex, id, head) is not None else ())

    def work(sol: Solution, step: Step, i: int, j: int) -> Text:
        if _up(sol.exercise, id):
            return _up_work(sol, step, i, j)
        if _cached(sol.exercise, id):
            return _append_work(sol, step, i, j)
        x, src, _, w, b = _parts(sol.exercise, id, step.head)
        xe, xv = _read(sol, x)
        rl, cl = step.row_labels[i], step.col_labels[j]
        pairs = [(factor(xe[i][k], xv[i][k]), factor(w[k][j], float(w[k][j]))) for k in range(len(w))]
        bias = f" + b_{wsym}[{cl}]" if b is not None else ""
        bias_value = f" + {factor(b[j], float(b[j]))}" if b is not None else ""
        return f"{src}[{rl}, :]·W_{wsym}[:, {cl}]{bias} = {dot(pairs)}{bias_value} {total(step.exact[i][j], step.value[i][j])}"

    def arithmetic(sol: Solution, step: Step, places: int) -> tuple[Worked, ...]:
        if _up(sol.exercise, id):
            return _up_arithmetic(sol, step, places)
        if _cached(sol.exercise, id):
            return ()  # K, V = [cache; new rows]: no arithmetic, the rows are those of k_new/v_new and the cache
        x, _, _, w, b = _parts(sol.exercise, id, step.head)
        xe, xv = _read(sol, x)

        def pairs_of(i: int, j: int, places: int) -> tuple[list[tuple[str, str]], str]:
            pairs = [(factor(xe[i][k], xv[i][k], places), factor(w[k][j], float(w[k][j]), places))
                     for k in range(len(w))]
            return pairs, factor(b[j], float(b[j]), places) if b is not None else ""

        return entry_products(step, pairs_of, places)

    def given(sol: Solution, step: Step) -> tuple:
        if _up(sol.exercise, id):
            return _up_given(sol, step)
        if _cached(sol.exercise, id):
            return _append_given(sol, step)
        x, src, rows, w, b = _parts(sol.exercise, id, step.head)
        out = [given_step(sol.step("x_norm")) if sol.exercise.has_norm else given_matrix(src, x, rows, dims("d", len(x[0]))),
               given_matrix(f"W_{wsym}", w, dims("r", len(w)), dims("d", len(w[0])))]
        if b is not None:
            out.append(given_matrix(f"b_{wsym}", (b,), ("",), dims("d", len(b))))
        return tuple(out)

    def why(step: Step, ex: Exercise) -> list[Text]:
        out: list[Text] = [Msg("step.k.why.cross")] if id != "q" and ex.is_cross else []
        out.append(Msg(f"step.{id}.why"))
        if id != "q" and ex.grouped:
            g = ex.kv_head(step.head or 0)
            out.append(Msg("step.kv.why.grouped", G=ex.num_kv_heads, H=ex.num_heads, kv=g + 1,
                         heads=Msg.joined("list.sep", [str(h + 1) for h in ex.sharing(g)]), ratio=ex.num_heads // ex.num_kv_heads))
        if _cached(ex, id):
            out.append(Msg("step.kv.why.cache", L_past=ex.L_past, L=len(ex.kv)))
        if _up(ex, id):
            out.append(Msg(f"step.{id}.why.latent"))
        return out

    def inputs(ex: Exercise, head: int | None) -> tuple[Key, ...]:
        if _up(ex, id):
            return (("c_kv", None),)
        if _cached(ex, id):
            return ((f"{id}_new", head),)
        return (("x_norm", None),) if ex.has_norm else ()  # the pre-norm block: the projections read X_norm

    varies = {"drop", "split_reshape"} | (set() if id == "q" else {"kv_order"}) | ({"cache"} if id in ("k", "v") else set())
    varies |= {"rope"} if id == "v" else set()  # RoPE's mistake of turning V too (tutor.steps.rope)
    return StepKind(
        id=id, scope="head", op="·", exists=(lambda ex: ex.has_cache) if id.endswith("_new") else always,
        inputs=inputs, build=build, varies=frozenset(varies), work=work, given=given, why=why, arithmetic=arithmetic,
        floats=_floats(id), slack=_slack(id), production=_production(id), rounding=_rounding(id),
        exact_walk=None if id.endswith("_new") else _exact(id),
        advanced=id.endswith("_new"), per_kv_head=id != "q",
    )


# --- k, v with a KV cache: [cache; new rows] --------------------------------------------------------------------


def _cache_of(ex: Exercise, id: str, head: int | None) -> Matrix:
    assert ex.cache is not None
    entry = ex.cache[ex.kv_head(head or 0)]
    return entry.k if id == "k" else entry.v


def _append(bd: Build, id: str, head: int | None) -> Step:
    ex = bd.ex
    sym = id.upper()
    new = bd.data[f"{id}_new", head]
    assert isinstance(new, exact.QMat)
    past = _cache_of(ex, id, head)
    m = exact.append(past, new)  # [L_past, d] over [L, d] -> [L_past + L, d]
    bd.data[id, head] = m
    d = len(past[0])
    ops = (Operand(f"{sym}_cache", (len(past), d)), Operand(f"{sym}_new", new.shape))
    return Step(id, head, sym, f"{sym} = [{sym}_cache; {sym}_new]", ops, "append", m.exact(), ex.key_labels,
                dims("d", d), kv_head=_kv(ex, id, head),
                shared=ex.sharing(ex.kv_head(head or 0)) if _kv(ex, id, head) is not None else ())


def _append_work(sol: Solution, step: Step, i: int, j: int) -> Text:
    ex = sol.exercise
    sym = step.id.upper()
    rl, cl = step.row_labels[i], step.col_labels[j]
    if i < ex.L_past:
        return Msg("practice.work.noted", work=f"{sym}_cache[{rl}, {cl}] {total(step.exact[i][j], step.value[i][j])}",
                 note=Msg("practice.work.cached"))
    return Msg("practice.work.noted", work=f"{sym}_new[{rl}, {cl}] {total(step.exact[i][j], step.value[i][j])}",
             note=Msg("practice.work.appended"))


def _append_given(sol: Solution, step: Step) -> tuple:
    ex = sol.exercise
    past = _cache_of(ex, step.id, step.head)
    return (given_matrix(f"{step.id.upper()}_cache", past, ex.past_labels, dims("d", len(past[0]))),
            given_step(sol.step(f"{step.id}_new", step.head)))


# --- k, v up-projected from multi-head latent attention's latent (format v3, mla): c_KV·W_UK, c_KV·W_UV ---------


def _up(ex: Exercise, id: str) -> bool:
    """True for ``k`` and ``v`` of an exercise with ``mla``: read off the latent ``c_kv`` (DeepSeek-V2, §2.1.2)."""
    return id in ("k", "v") and ex.mla is not None


def _up_weight(ex: Exercise, id: str, head: int | None) -> Matrix:
    """``W_UK`` ``[d_c, d_k]`` or ``W_UV`` ``[d_c, d_v]`` of ``head``."""
    assert ex.mla is not None
    return (ex.mla.w_uk if id == "k" else ex.mla.w_uv)[head or 0]


def _up_build(bd: Build, id: str, head: int | None) -> Step:
    ex = bd.ex
    sym = id.upper()
    c = bd.data["c_kv", None]
    assert isinstance(c, exact.QMat)
    w = _up_weight(ex, id, head)
    m = c @ exact.QMat.of(w)  # [L_k, d_c]·[d_c, d] -> [L_k, d]
    bd.data[id, head] = m
    ops = (Operand("c_KV", c.shape), Operand(f"W_U{sym}", (len(w), len(w[0]))))
    return Step(id, head, sym, f"{sym} = c_KV·W_U{sym}", ops, "·", m.exact(), ex.key_labels, dims("d", len(w[0])))


def _up_work(sol: Solution, step: Step, i: int, j: int) -> str:
    c, w = sol.step("c_kv", None), _up_weight(sol.exercise, step.id, step.head)
    pairs = [(factor(c.exact[i][n], c.value[i][n]), factor(w[n][j], float(w[n][j]))) for n in range(len(w))]
    return (f"c_KV[{step.row_labels[i]}, :]·W_U{step.id.upper()}[:, {step.col_labels[j]}] = {dot(pairs)} "
            f"{total(step.exact[i][j], step.value[i][j])}")


def _up_arithmetic(sol: Solution, step: Step, places: int) -> tuple[Worked, ...]:
    c, w = sol.step("c_kv", None), _up_weight(sol.exercise, step.id, step.head)

    def pairs_of(i: int, j: int, places: int) -> tuple[list[tuple[str, str]], str]:
        return [(factor(c.exact[i][n], c.value[i][n], places), factor(w[n][j], float(w[n][j]), places))
                for n in range(len(w))], ""

    return entry_products(step, pairs_of, places)


def _up_given(sol: Solution, step: Step) -> tuple:
    w = _up_weight(sol.exercise, step.id, step.head)
    return (given_step(sol.step("c_kv", None)),
            given_matrix(f"W_U{step.id.upper()}", w, dims("c", len(w)), dims("d", len(w[0]))))


# --- the float walk ---------------------------------------------------------------------------------------------


def _kv_weights(r: Replay, id: str, head: int | None) -> tuple[Sequence[Sequence[Fraction]], Sequence[Fraction] | None]:
    """``(W, b)`` of K or V (``id``) for query head ``head``: its K/V head's (``h // (H/G)``; ``h % G`` under ``kv_order="tile"``)."""
    ex = r.ex
    owner: object = ex.heads[head or 0]  # a query head holds its K/V head's weights (repeat_interleave order)
    if ex.kv_heads is not None and r.variant.kv_order == "tile":
        owner = ex.kv_heads[(head or 0) % ex.num_kv_heads]
    return getattr(owner, f"w_{id}"), getattr(owner, f"b_{id}")


def _project(r: Replay, id: str, head: int | None) -> Array | None:
    """``Q = X·W_Q + b_Q``, ``K = X_kv·W_K + b_K``, ``V = X_kv·W_V + b_V``: ``[n, d]``.

    K and V of query head ``h`` are its K/V head's (:func:`_kv_weights`).
    Under ``split_reshape`` every head is projected at once (``[n, H·d]``,
    head ``h`` in columns ``h·d:(h+1)·d``; for K and V with grouped K/V
    heads, the ``G`` K/V heads, ``[n, G·d]``) and the result reshaped
    straight to ``[H, n, d]`` (``[G, n, d]``): head ``h`` gets rows of the
    flat buffer, not its columns.
    """
    x = r.x if id == "q" else r.kv  # [n, d_in]; step id: Q is projected from X, K and V from X_kv
    if r.ex.has_norm:
        xn = r.input("x_norm", None)  # the pre-norm block: X_norm (self-attention only)
        if xn is None:
            return None
        x = xn

    def one(h: int) -> Array:
        hd = r.ex.heads[h]
        w, b = {"q": (hd.w_q, hd.b_q)}.get(id) or _kv_weights(r, id, h)
        return x @ floats(w) + r.bias(f"b_{id}", b)  # [n, d_in]·[d_in, d] -> [n, d]

    if not r.variant.split_reshape:
        return one(head or 0)
    ex = r.ex
    if id != "q" and ex.grouped:  # one query head per K/V head stands for it: [n, G·d]
        owners = [ex.sharing(g)[0] for g in range(ex.num_kv_heads)]
        part = ex.kv_head(head or 0)
    else:
        owners, part = list(range(ex.num_heads)), head or 0
    fused = np.hstack([one(h) for h in owners])  # [n, H·d]: the heads side by side
    n, width = fused.shape
    return fused.reshape(len(owners), n, width // len(owners))[part]  # [H, n, d] without the transpose: tokens and heads mixed


def _with_cache(r: Replay, id: str, head: int | None, new: Array | None) -> Array | None:
    """``[cache; new rows]`` ``[L_past + L, d]`` (format v2); the cache multiplied by W again under ``cache="reprojected"``."""
    if new is None:
        return None
    past = floats(_cache_of(r.ex, id, head))  # [L_past, d]
    if r.variant.cache == "reprojected":
        w, b = _kv_weights(r, id, head)
        W = floats(w)  # [d_model, d]
        if W.shape[0] != past.shape[1]:
            return None  # the cache's rows are not inputs of W: the mistake cannot be made here
        past = past @ W + r.bias(f"b_{id}", b)  # [L_past, d]
    return np.vstack([past, new])  # [L_past + L, d]


def _floats(id: str):
    def run(r: Replay, head: int | None) -> Array | None:
        if _up(r.ex, id):
            c, = r.inputs(KINDS[id], head)
            return None if c is None else c @ floats(_up_weight(r.ex, id, head))  # [L_k, d_c]·[d_c, d] -> [L_k, d]
        rotate_v = id == "v" and r.variant.rope == "rotate_v" and r.ex.rope is not None  # V turned as Q and K are
        if _cached(r.ex, id):
            new, = r.inputs(KINDS[id], head)
            if rotate_v and new is not None:  # a decode step: the new rows turned at their positions (L_past on),
                from .rope import rotated  # as k_rot turns the new keys; the cache's V rows as stored

                if new.shape[1] % 2:
                    return None
                new = rotated(r.ex, new, r.ex.key_positions[r.ex.L_past:])  # [L, d_v]
            return _with_cache(r, id, head, new)
        out = _project(r, id[0], head)
        if out is not None and rotate_v:
            from .rope import rotated

            return None if out.shape[1] % 2 else rotated(r.ex, out, r.ex.key_positions)  # [L_k, d_v]
        return out

    return run


def _slack(id: str):
    def run(r: Replay, head: int | None) -> Array:
        """Projected from the exercise: none; with a cache, the cached rows are exact and the new ones carry their slack;
        up-projected from the latent (mla): the latent's slack times ``|W_UK|`` (``|W_UV|``); read off X_norm (the
        pre-norm block): X_norm's slack times ``|W|``."""
        if _up(r.ex, id):
            return r.delta("c_kv", None) @ magnitude(_up_weight(r.ex, id, head))  # [L_k, d_c]·[d_c, d]
        if not _cached(r.ex, id) and r.ex.has_norm:  # X_norm's slack through W: |δX_norm|·|W|
            w, _ = _kv_weights(r, id[0], head) if id != "q" else (r.ex.heads[head or 0].w_q, None)
            return r.delta("x_norm", None) @ np.abs(floats(w))
        if not _cached(r.ex, id):
            return np.zeros_like(r.value((id, head)))
        (new_key,) = KINDS[id].inputs(r.ex, head)
        new = r.delta(*new_key)
        return np.vstack([np.zeros((r.ex.L_past, new.shape[1])), new])  # [L_past + L, d]

    return run


# --- the batched layer: x·W + b, one dot product of d_in terms per entry, inputs rounded to float64 once ---------


def _production(id: str):
    def read(run: LayerRun, ex: Exercise, head: int | None) -> Array:
        value = getattr(run, id)
        assert value is not None  # k_new, v_new: a run of format v2
        return value[head]

    return read


def _rounding(id: str):
    def bound(r: Replay, head: int | None) -> Array:
        ex = r.ex
        if _up(ex, id):  # the latent's bound carried, plus the up-projection's d_c-term dot products
            W = magnitude(_up_weight(ex, id, head))  # [d_c, d]
            return r.delta("c_kv", None) @ W + gamma(len(W) + 2) * (np.abs(r.value(("c_kv", None))) @ W)
        x, _, _, w, b = _parts(ex, id, head)
        if _cached(ex, id) and (f"{id}_new", head) in r.values:  # format v2: K, V are [cache; new]
            new = r.delta(f"{id}_new", head)  # [L, d]
            return np.vstack([UNIT * magnitude(_cache_of(ex, id, head)), new])  # the cache is rounded to float64 once
        if ex.has_norm:  # X_norm carries its own bound, carried through W
            xn = np.abs(r.value(("x_norm", None)))
            return (gamma(len(x[0]) + 3) * (xn @ magnitude(w) + magnitude(b, (len(w[0]),)))
                    + r.delta("x_norm", None) @ magnitude(w))
        return gamma(len(x[0]) + 3) * (magnitude(x) @ magnitude(w) + magnitude(b, (len(w[0]),)))  # [n, d]

    return bound


# --- the exact walk: on the exact engine's integers --------------------------------------------------------


def _exact(id: str):
    def run(w: ExactWalk, head: int | None) -> em.Matrix | None:
        ex = w.ex
        if _up(ex, id):  # c_KV·W_UK (W_UV), on the latent's integers
            c = w.qmats.get(("c_kv", None))
            if c is None:
                return None
            up = c @ exact.QMat.of(_up_weight(ex, id, head))  # [L_k, d_c]·[d_c, d] -> [L_k, d]
            w.qmats[id, head] = up
            return [list(row) for row in up.fractions()]
        hd = ex.heads[head or 0]
        x, W, b = {"q": (ex.x, hd.w_q, hd.b_q), "k": (ex.kv, hd.w_k, hd.b_k), "v": (ex.kv, hd.w_v, hd.b_v)}[id]
        if ex.has_norm:  # X_norm's entries hold square roots: no integers here, the scores are taken on values
            xn = w.input("x_norm", None)
            if xn is None:
                return None
            normed = em.matmul(xn, em.rational(W))
            return None if normed is None else em.plus(normed, w.bias(f"b_{id}", b))
        m = exact.project(x, W, w.bias(f"b_{id}", b))  # [n, d_in]·[d_in, d] -> [n, d], on integers (QMat)
        w.qmats[id, head] = m
        return [list(row) for row in m.fractions()]

    return run


Q, K, V = _kind("q"), _kind("k"), _kind("v")
K_NEW, V_NEW = _kind("k_new"), _kind("v_new")
KINDS = {k.id: k for k in (Q, K_NEW, V_NEW, K, V)}
#: The projections in the contract's order.
PROJECTIONS: tuple[StepKind, ...] = (Q, K_NEW, V_NEW, K, V)
