"""RoPE's steps (format v3, issue 23): ``Q_rot``, ``K_rot``, each head's Q and K turned by position.

Su et al. 2021, "RoFormer", §3.4.2: pair ``i`` of the query or key of the
token at position ``m`` (its index from 0) turns by ``m·θ_i``,
``θ_i = base^(−2i/d_k)``: ``[a, b] → [a·cos − b·sin, a·sin + b·cos]``;
``interleaved`` pairs dimensions ``(2i, 2i+1)``, ``half`` pairs
``(i, i + d_k/2)`` (``rotate_half``).  The scores then read ``Q_rot`` and
``K_rot`` (:mod:`tutor.steps.scores`).  Since a rotation is
orthogonal, ``(R_m q)·(R_n k) = q·R_(n−m) k``: the score depends on the
positions through ``m − n`` only.

Each kind's engines, side by side: the exact build (:mod:`tutor.exact.rotary`:
cosines and sines of rational angles kept exact), the float walk under
RoPE's mistakes (the other pairing, the two layouts mixed, positions from 1, ``θ`` without the 2;
V turned too is :mod:`tutor.steps.projection`'s), the decoder's reading
(:func:`tutor.numeric.rotary.apply_rope`) and its rounding bound.  There is
no exact walk: the exact walk's values (:mod:`tutor.exact.expoly`) have
algebraic exponents, and RoPE's are not (``exp(cos(1))``): the floats
decide its mistakes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base.messages import Msg, Text
from ..exact import rotary
from ..exact.numbers import frac_text, notation
from ..exercise.record import Exercise, Rope, rope_pairs
from .kind import StepKind, dims, given_step
from .records import Key, Operand, Solution, Step
from .rounding import gamma
from .state import Build, Replay
from .worked import Worked, entry_name, factor, result, total

if TYPE_CHECKING:
    import numpy as np

    from ..numeric.layer import LayerRun
    from .rounding import Array
else:
    from ..base.lazy import numpy as np


def _rope(ex: Exercise) -> Rope:
    assert ex.rope is not None  # the steps exist only with RoPE
    return ex.rope


def pair_of(ex: Exercise, d_k: int, j: int) -> tuple[int, int, int]:
    """``(i, a, b)``: column ``j`` of a rotated matrix (``d_k`` columns) belongs to pair ``i``, of columns
    ``(a, b)`` (the exercise's pairing: interleaved or half).  Its worked arithmetic and its gradient's read it."""
    for i, (a, b) in enumerate(_rope(ex).pairs(d_k)):
        if j in (a, b):
            return i, a, b
    raise AssertionError(j)


def positions(ex: Exercise, id: str) -> tuple[int, ...]:
    """The positions of the rows ``id`` turns: the queries' (``q_rot``) or the keys' (``k_rot``), from 0."""
    return ex.query_positions if id == "q_rot" else ex.key_positions


def has_rope(ex: Exercise) -> bool:
    """``exists`` of the RoPE steps: the exercise has ``rope``."""
    return ex.rope is not None


OTHER = {"interleaved": "half", "half": "interleaved"}


def _cached_rows(ex: Exercise, id: str) -> int:
    """How many leading rows of ``id`` a KV cache holds already rotated: ``L_past`` for ``k_rot``, else 0."""
    return ex.L_past if id == "k_rot" else 0


# --- the exact build ----------------------------------------------------------------------------------------


def _kind(id: str) -> StepKind:
    src = id[0]  # "q" or "k"
    sym = src.upper()

    def inputs(ex: Exercise, head: int | None) -> tuple[Key, ...]:
        return ((src, head),)

    def build(bd: Build, head: int | None) -> Step:
        ex = bd.ex
        rope = _rope(ex)
        (M,) = bd.inputs(KINDS[id], head)  # a QMat [n, d_k]
        n, d_k = M.shape
        thetas = rope.thetas(d_k)
        assert thetas is not None  # tutor.exercise.rope refuses an irrational angle
        rows, pos = M.fractions(), positions(ex, id)
        kept = _cached_rows(ex, id)  # a KV cache's keys are stored already rotated: kept as they are
        R = rotary.rotate(rows[kept:], pos[kept:], thetas, rope.pairs(d_k))  # [n − kept, d_k], exact
        if kept:
            R = rotary.TrigMat(tuple(tuple(rotary.Trig.of(x) for x in row) for row in rows[:kept]) + R.num)  # [n, d_k]
        bd.data[id, head] = R
        formula = f"{sym}_rot = RoPE({sym}),  θ_i = {rope.base}^(−2i/{d_k})"
        kv = ex.kv_head(head or 0) if src == "k" and ex.grouped else None
        return Step(id, head, f"{sym}_rot", formula, (Operand(sym, (n, d_k)),), "rot", R.exact(),
                    ex.query_labels if src == "q" else ex.key_labels, dims("d", d_k), kv_head=kv,
                    shared=ex.sharing(kv) if kv is not None else ())

    def angle(ex: Exercise, d_k: int, row: int, i: int) -> str:
        thetas = _rope(ex).thetas(d_k)
        assert thetas is not None
        return frac_text(positions(ex, id)[row] * thetas[i])

    def work(sol: Solution, step: Step, r: int, j: int) -> Text:
        ex = sol.exercise
        m = sol.step(src, step.head)
        if r < _cached_rows(ex, id):
            return Msg("practice.work.noted", work=f"{sym}_cache[{step.row_labels[r]}, {step.col_labels[j]}] "
                     f"{total(step.exact[r][j], step.value[r][j])}", note=Msg("rope.work.cached"))
        d_k = m.shape[1]
        i, a, b = pair_of(ex, d_k, j)
        ang = angle(ex, d_k, r, i)
        rl, ca, cb = step.row_labels[r], m.col_labels[a], m.col_labels[b]
        fa, fb = factor(m.exact[r][a], m.value[r][a]), factor(m.exact[r][b], m.value[r][b])
        if j == a:
            rule = f"{sym}[{rl}, {ca}]·cos({ang}) - {sym}[{rl}, {cb}]·sin({ang})"
            nums = f"{fa}·cos({ang}) - {fb}·sin({ang})"
        else:
            rule = f"{sym}[{rl}, {ca}]·sin({ang}) + {sym}[{rl}, {cb}]·cos({ang})"
            nums = f"{fa}·sin({ang}) + {fb}·cos({ang})"
        return f"{rule} = {nums} {total(step.exact[r][j], step.value[r][j])}"

    def arithmetic(sol: Solution, step: Step, places: int) -> tuple[Worked, ...]:
        ex = sol.exercise
        m = sol.step(src, step.head)
        d_k = m.shape[1]
        thetas = _rope(ex).thetas(d_k)
        assert thetas is not None
        pos = positions(ex, id)
        out = []
        for r in range(step.shape[0]):
            if r < _cached_rows(ex, id):  # a cached key: stored rotated, not turned again
                out.append(Worked(step.row_labels[r], (Msg("rope.work.cached"),), ": "))
                continue
            for i, (a, b) in enumerate(_rope(ex).pairs(d_k)):
                ang = frac_text(pos[r] * thetas[i])
                fa = factor(m.exact[r][a], m.value[r][a], places)
                fb = factor(m.exact[r][b], m.value[r][b], places)
                # the angle: a query's position is m, a key's n (the hints' and the explanation's letters)
                first = notation(f"{'m' if src == 'q' else 'n'}·θ_{i} = {pos[r]}·{factor(thetas[i], float(thetas[i]))} = {ang}")
                out.append(Worked(f"{step.row_labels[r]} ({step.col_labels[a]}, {step.col_labels[b]})", (first,), ": "))
                # [a, b] → [a·cos − b·sin, a·sin + b·cos]: each output of the pair an entry of its own
                xa = notation(f"{fa}·cos({ang}) - {fb}·sin({ang}) ") + result(step.exact[r][a], step.value[r][a], places)
                xb = notation(f"{fa}·sin({ang}) + {fb}·cos({ang}) ") + result(step.exact[r][b], step.value[r][b], places)
                out.append(Worked(entry_name(step, r, a), (xa,)))
                out.append(Worked(entry_name(step, r, b), (xb,)))
        return tuple(out)

    def why(step: Step, ex: Exercise) -> list[Text]:
        rope = _rope(ex)
        d_k = ex.heads[step.head or 0].d_k
        out: list[Text] = [Msg(f"step.{id}.why", base=rope.base, d_k=d_k)]
        out.append(Msg(f"step.rope.why.{rope.pairing}"))
        if _cached_rows(ex, id):
            out.append(Msg("step.k_rot.why.cache", L_past=ex.L_past))
        if ex.window is not None and ex.sinks:  # text positions, not StreamingLLM's places in the cache (trial F14)
            out.append(Msg("step.rope.why.sinks"))
        return out

    return StepKind(
        id=id, scope="head", op="rot", exists=has_rope, inputs=inputs, build=build, work=work,
        given=lambda sol, step: (given_step(sol.step(src, step.head)),),
        floats=_floats(id), slack=_slack(id), production=_production(id), rounding=_rounding(id),
        exact_walk=None, why=why, arithmetic=arithmetic, varies=frozenset({"rope"}),
        latex=(r"$result = \mathrm{RoPE}($op0):\ [a, b] \mapsto [a\cos m\theta_i - b\sin m\theta_i,\ "
               r"a\sin m\theta_i + b\cos m\theta_i],\ \theta_i = \mathrm{base}^{-2i/$d_k}"),
        per_kv_head=src == "k", advanced=True,
    )


# --- the float walk: the rotation in float64, under RoPE's mistakes ----------------------------------------


def rotated(ex: Exercise, M: Array, rows: tuple[int, ...], mistake: str = "right") -> Array:
    """``M [n, d]`` turned as RoPE does, or as ``mistake`` does it (:attr:`~tutor.steps.Variant.rope`):
    ``pairing`` the other pairing, ``from_one`` positions counted from 1, ``no_two`` ``θ_i = base^(−i/d)``,
    a key of :data:`MIXED` one layout's pairs turned by the other layout's angles.
    ``rows`` are the rows' positions.  ``[n, d]``."""
    from ..numeric.rotary import rotate_pairs

    angles, pairing = _angles(ex, M.shape[1], rows, mistake)
    if mistake in MIXED:
        return _mixed(M, angles, MIXED[mistake], back=False)
    return rotate_pairs(M, angles, pairing)  # [n, d/2] angles -> [n, d]


#: The two layouts mixed (issue 23, the public report "rotate_half against interleaved frequencies"): a knob value
#: of :attr:`~tutor.steps.Variant.rope` -> the layout whose pairs are turned.  ``half_interleaved_angles``:
#: ``x·cos + rotate_half(x)·sin`` with cos, sin of the angles repeated in place (``repeat_interleave``:
#: θ_0, θ_0, θ_1, θ_1, …, the interleaved layout's); ``interleaved_half_angles``: the pairs (2i, 2i+1) turned by
#: cos, sin of the angles concatenated with themselves (θ_0, θ_1, …, θ_0, θ_1, …, rotate_half's).  Either may be
#: made on an exercise of either pairing.
MIXED = {"half_interleaved_angles": "half", "interleaved_half_angles": "interleaved"}


def _mixed(M: Array, angles: Array, layout: str, *, back: bool) -> Array:
    """``M [n, d]`` through ``x·cos + rot(x)·sin`` with ``rot`` the pair swap of ``layout`` (``rotate_half``, or
    ``(−x_{2i+1}, x_{2i})`` for interleaved) and cos, sin of ``angles [n, d/2]`` laid out for the OTHER layout.
    ``back``: the transpose of that map (``g·cos − rot(g·sin)``: ``rot`` is antisymmetric), what turning a
    gradient back with the same mix gives.  ``[n, d]``."""
    full = np.repeat(angles, 2, axis=-1) if layout == "half" else np.concatenate([angles, angles], axis=-1)  # [n, d]
    cos, sin = np.cos(full), np.sin(full)  # [n, d]

    def rot(x: Array) -> Array:
        d = x.shape[-1]
        if layout == "half":
            return np.concatenate([-x[:, d // 2:], x[:, : d // 2]], axis=-1)  # rotate_half
        out = np.empty_like(x)
        out[:, 0::2], out[:, 1::2] = -x[:, 1::2], x[:, 0::2]  # rotate_every_two
        return out

    return M * cos - rot(M * sin) if back else M * cos + rot(M) * sin


def turned_back(ex: Exercise, M: Array, rows: tuple[int, ...], mistake: str = "right") -> Array:
    """``M [n, d]`` (a gradient of ``Q_rot`` or ``K_rot``) turned back: pair ``i`` of row ``p`` by
    ``R(m·θ_i)ᵀ = R(−m·θ_i)`` (a rotation is orthogonal: RoFormer §3.2.2), the angles and pairing as
    ``mistake`` takes them (:func:`rotated`).  ``[n, d]`` (the backward pass through RoPE, issue 23)."""
    from ..numeric.rotary import rotate_pairs

    angles, pairing = _angles(ex, M.shape[1], rows, mistake)
    if mistake in MIXED:
        return _mixed(M, angles, MIXED[mistake], back=True)
    return rotate_pairs(M, -angles, pairing)  # [n, d/2] angles -> [n, d]


def _angles(ex: Exercise, d: int, rows: tuple[int, ...], mistake: str) -> tuple[Array, str]:
    """``m·θ_i`` of each row and pair ``[n, d/2]``, and the pairing, as :func:`rotated` under ``mistake``."""
    rope = _rope(ex)
    pos = np.array(rows, dtype=np.float64) + (1.0 if mistake == "from_one" else 0.0)  # [n]
    step = 1.0 if mistake == "no_two" else 2.0  # θ_i = base^(−2i/d); the mistake leaves the 2 out
    theta = float(rope.base) ** (-step * np.arange(d // 2, dtype=np.float64) / d)  # [d/2]
    pairing = OTHER[rope.pairing] if mistake == "pairing" else rope.pairing
    return pos[:, None] * theta[None, :], pairing  # [n, 1]·[1, d/2] -> [n, d/2]


def _floats(id: str):
    def run(r: Replay, head: int | None) -> Array | None:
        (M,) = r.inputs(KINDS[id], head)
        if M is None:
            return None
        if M.shape[1] % 2:  # a mistake upstream changed the width (cannot happen: Q, K keep d_k)
            return None
        kept = _cached_rows(r.ex, id)  # the cached keys: stored rotated, kept as they are
        new = rotated(r.ex, M[kept:], positions(r.ex, id)[kept:], r.variant.rope)  # [n − kept, d_k]
        return np.vstack([M[:kept], new]) if kept else new

    return run


def _slack(id: str):
    def run(r: Replay, head: int | None) -> Array:
        """A turn moves each output of a pair by at most ``|δa|·|cos| + |δb|·|sin| <= δa + δb``."""
        (key,) = KINDS[id].inputs(r.ex, head)
        d = r.delta(*key)  # [n, d_k]
        out = pair_sum(r.ex, d)
        kept = _cached_rows(r.ex, id)
        out[:kept] = d[:kept]  # the cached keys are read as they are
        return out

    return run


def pair_sum(ex: Exercise, m: Array) -> Array:
    """Each entry replaced by the sum of its pair's two entries: ``[n, d_k]``."""
    out = np.empty_like(m)
    for a, b in rope_pairs(_rope(ex).pairing, m.shape[1]):
        out[:, a] = out[:, b] = m[:, a] + m[:, b]
    return out


def _production(id: str):
    def read(run: LayerRun, ex: Exercise, head: int | None) -> Array:
        value = getattr(run, id)
        assert value is not None  # a run of an exercise with RoPE
        return value[head]

    return read


def _rounding(id: str):
    def bound(r: Replay, head: int | None) -> Array:
        """The inputs' bound carried, plus float64's rounding of the angle (``m·θ`` to ``u·m·θ``), of cos and
        sin, and of the two products and their sum: a few units of ``|a| + |b|`` times ``1 + m·θ``."""
        (key,) = KINDS[id].inputs(r.ex, head)
        M = np.abs(r.value(key))  # [n, d_k]
        pos = np.array(positions(r.ex, id), dtype=np.float64)[:, None]  # [n, 1]
        bound = pair_sum(r.ex, r.delta(*key)) + gamma(8) * (1.0 + pos) * pair_sum(r.ex, M)  # [n, d_k]
        kept = _cached_rows(r.ex, id)
        bound[:kept] = r.delta(*key)[:kept]  # the cached keys are read as they are
        return bound

    return bound


Q_ROT, K_ROT = _kind("q_rot"), _kind("k_rot")
KINDS = {k.id: k for k in (Q_ROT, K_ROT)}
#: RoPE's steps in the contract's order: after the projections, before the scores.
ROPE_STEPS: tuple[StepKind, ...] = (Q_ROT, K_ROT)
