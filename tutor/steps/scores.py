"""The scores of one head: ``Q·Kᵀ``, scaled by ``1/√d_k``, a bias added (format v2), the mask added.

``softmax(Q Kᵀ / √d_k + B + M) V`` (Vaswani et al. 2017, eq. 1; the bias
``B`` a float ``attn_mask`` of PyTorch's ``scaled_dot_product_attention``
or ALiBi's ``B_ij = m_h·(j − i)`` with ``m_h`` the paper's slope of head ``h``, Press et al.
2022, §3 (:func:`tutor.exercise.record.alibi_exponents`); the mask ``M`` as in PyTorch's SDPA: 0 where a query may attend a
key, ``-inf`` where it may not).  The softmax and what follows it are
:mod:`tutor.steps.softmax`.

Each kind's engines, side by side: the exact build (:mod:`tutor.exact.engine`),
the float walk and its slack (under a misconception's knobs: ``K·Qᵀ``, a
wrong scale, the mask inverted, forgotten, filled with 0 or applied after
the softmax, the bias negated or added after it), the batched layer's
reading and its float64 rounding bound, and the exact walk.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING

from ..base.messages import Msg, Text
from ..exact import engine as exact
from ..exact import matrices as em
from ..exact.engine import Scaled
from ..exact.expoly import root
from ..exact.numbers import frac_text, notation
from ..exercise.record import Exercise, alibi_exponents, alibi_slope
from .kind import Input, StepKind, always, given_matrix, given_step
from .records import Key, Operand, Solution, Step
from .rounding import gamma, magnitude
from .state import PASS, Build, ExactWalk, Replay, floats, mul_slack
from .worked import Worked, as_written, dot, entry_name, entry_products, exact_factor, factor, result, total

if TYPE_CHECKING:
    import numpy as np

    from ..numeric.layer import LayerRun
    from .rounding import Array
else:
    from ..base.lazy import numpy as np


def pre_mask(ex: Exercise, head: int | None) -> Key:
    """What the mask is added to: the biased scores when the exercise has a bias (format v2), else the scaled ones."""
    return ("biased", head) if ex.has_bias else ("scaled", head)


def softmax_input(ex: Exercise, head: int | None) -> Key:
    """What the softmax reads: the masked scores when the exercise has a mask, else the biased or scaled ones."""
    return ("masked", head) if ex.has_mask else pre_mask(ex, head)


def empty_rows(ex: Exercise) -> list[int]:
    """The 0-based query rows of ``ex`` that may attend to no key at all."""
    allowed = ex.allowed()
    return [] if allowed is None else [i for i, row in enumerate(allowed) if not any(row)]


def torch_empty_row() -> Text:
    """What PyTorch 2.13 gives for a query row that may attend to no key, per API and setting.

    Each fact is checked against torch in ``tests/test_torch_claims.py``:
    SDPA returns no weights and a zero output row (since 2.5: its math path
    calls ``_safe_softmax``, pytorch/pytorch#133882);
    ``nn.MultiheadAttention`` returns NaN with ``need_weights=True`` and on
    its inference fast path (taken only when every condition in
    ``MultiheadAttention.forward`` holds: eval, no gradient to track, bool
    masks, ``bias=True`` ...), and ``out_proj.bias`` (0 with ``bias=False``)
    with ``need_weights=False`` off the fast path.
    """
    facts = [Msg(f"torch.empty_row.{k}") for k in ("sdpa", "mha_nan", "mha_fast", "mha_bias")]
    return Msg("torch.empty_row", facts=Msg.joined("torch.facts.sep", facts))


# --- scores: Q·Kᵀ ---------------------------------------------------------------------------------------


def _scores_inputs(ex: Exercise, head: int | None) -> tuple[Key, ...]:
    """Q and K, or with RoPE (format v3) the rotated ones, ``Q_rot`` and ``K_rot``."""
    if ex.rope is not None:
        return (("q_rot", head), ("k_rot", head))
    return (("q", head), ("k", head))


def _scores(bd: Build, h: int | None) -> Step:
    ex = bd.ex
    Q, K = bd.inputs(SCORES, h)
    S = exact.scores(Q, K)  # [L, d_k]·[d_k, L_k] -> [L, L_k]
    bd.data["scores", h] = S
    d_k = ex.heads[h or 0].d_k
    q, k = ("Q_rot", "K_rot") if ex.rope is not None else ("Q", "K")
    ops = (Operand(q, (ex.L, d_k)), Operand(f"{k}ᵀ", (d_k, ex.L_k)))
    return Step("scores", h, "scores", f"scores = {q}·{k}ᵀ", ops, "·", S.exact(), ex.query_labels, ex.key_labels)


def _scores_floats(r: Replay, head: int | None) -> Array | None:
    """``Q·Kᵀ`` ``[L, L_k]`` (``K·Qᵀ`` ``[L_k, L]`` under ``kq``)."""
    Q, K = r.inputs(SCORES, head)
    if Q is None or K is None:
        return None
    return K @ Q.T if r.variant.kq else Q @ K.T  # [L_k, L] or [L, d_k]·[d_k, L_k] -> [L, L_k]


def _scores_slack(r: Replay, head: int | None) -> Array:
    q, k = _scores_inputs(r.ex, head)
    return mul_slack(r.value(q), r.delta(*q), r.value(k).T, r.delta(*k).T)


def _scaled_rounding(r: Replay, head: int | None) -> Array:
    """The bound of the layer's scaled scores: Q's and K's errors carried, plus the dot product's rounding
    (the layer computes ``(q/√d_k)·kᵀ``)."""
    q, k = _scores_inputs(r.ex, head)
    Q, K = np.abs(r.value(q)), np.abs(r.value(k))
    e_q, e_k = r.delta(*q), r.delta(*k)
    d_k = r.ex.heads[head or 0].d_k
    e_s = e_q @ K.T + Q @ e_k.T + e_q @ e_k.T + gamma(d_k + 2) * (Q @ K.T)  # [L, L_k]
    return e_s / math.sqrt(d_k) + gamma(3) * np.abs(r.value(("scores", head))) / math.sqrt(d_k)


def _scores_production(run: LayerRun, ex: Exercise, head: int | None) -> Array:
    return run.scores[head] * math.sqrt(ex.heads[head or 0].d_k)  # [L, L_k], the scale undone


def _scores_rounding(r: Replay, head: int | None) -> Array:
    d_k = r.ex.heads[head or 0].d_k
    return _scaled_rounding(r, head) * math.sqrt(d_k) + gamma(2) * np.abs(r.value(("scores", head))) / math.sqrt(d_k)


def _scores_exact(w: ExactWalk, head: int | None) -> em.Matrix | None:
    q, k = _scores_inputs(w.ex, head)
    Q, K = w.qmats.get(q), w.qmats.get(k)  # the exact engine's integers: never rounded
    if w.ex.has_norm:  # the pre-norm block: Q and K hold square roots, the scores are products of values
        Qv, Kv = w.input(*q), w.input(*k)
        if Qv is None or Kv is None:
            return None
        return em.matmul(Kv, em.transpose(Qv)) if w.variant.kq else em.matmul(Qv, em.transpose(Kv))
    if Q is None or K is None:
        return None
    S = exact.scores(K, Q) if w.variant.kq else exact.scores(Q, K)  # [L_k, L] or [L, L_k], on integers
    return [list(row) for row in S.fractions()]


def _scores_work(sol: Solution, step: Step, i: int, j: int) -> str:
    q, k = (sol.step(*key) for key in _scores_inputs(sol.exercise, step.head))
    pairs = [(exact_factor(q.exact[i][n], q.value[i][n]), exact_factor(k.exact[j][n], k.value[j][n]))
             for n in range(q.shape[1])]  # RoPE's cos(1) written as such; otherwise as factor() writes it
    tail = total(step.exact[i][j], step.value[i][j], rounded=not as_written(pairs, "", step.exact[i][j]))
    return f"{q.name}[{step.row_labels[i]}, :]·{k.name}[{step.col_labels[j]}, :] = {dot(pairs)} {tail}"


def _scores_arithmetic(sol: Solution, step: Step, places: int) -> tuple[Worked, ...]:
    q, k = (sol.step(*key) for key in _scores_inputs(sol.exercise, step.head))

    def pairs_of(i: int, j: int, places: int) -> tuple[list[tuple[str, str]], str]:
        return [(exact_factor(q.exact[i][n], q.value[i][n], places), exact_factor(k.exact[j][n], k.value[j][n], places))
                for n in range(q.shape[1])], ""

    return entry_products(step, pairs_of, places)



def _scores_title(ex: Exercise) -> str:
    """The scores' title key: ``Q_rot·K_rotᵀ`` with RoPE (the rotated Q and K are multiplied), the explicit
    ``Q·Kᵀ`` beside MLA's absorbed route, else ``Q·Kᵀ``."""
    if ex.rope is not None:
        return "step.scores.title.rope"
    return "step.scores.title.mla" if ex.mla is not None else "step.scores.title"


SCORES = StepKind(
    id="scores", scope="head", op="·", exists=always, inputs=_scores_inputs,
    build=_scores, floats=_scores_floats, slack=_scores_slack, production=_scores_production,
    rounding=_scores_rounding, exact_walk=_scores_exact,
    varies=frozenset({"kq"}), work=_scores_work, arithmetic=_scores_arithmetic,
    given=lambda sol, step: tuple(given_step(sol.step(*key)) for key in _scores_inputs(sol.exercise, step.head)),
    latex=r"\text{scores} = $op0 $op1", axes_note=True, title_key=_scores_title,
)


# --- scaled: scores / √d_k ------------------------------------------------------------------------------


def _scaled(bd: Build, h: int | None) -> Step:
    ex = bd.ex
    (S,) = bd.inputs(SCALED, h)
    d_k = ex.heads[h or 0].d_k
    sc = exact.scale(S, d_k)  # [L, L_k] = U·√t
    bd.data["scaled", h] = sc
    s, t_ = sc.s, sc.t
    root_text = f"√{d_k}" + (f" = {s}" if t_ == 1 else (f" = {s}√{t_}" if s != 1 else ""))
    ops = (Operand("scores", (ex.L, ex.L_k)), Operand(f"√{d_k}", ()))
    return Step("scaled", h, "scaled", f"scaled = scores / √d_k,  √d_k = {root_text}", ops, "/", sc.exact(),
                ex.query_labels, ex.key_labels)


def _scale_factor(r: Replay, head: int | None) -> float:
    """What the scores are multiplied by: ``1/√d_k``, or the variant's constant."""
    d_k = r.ex.heads[head or 0].d_k
    if r.variant.divisor is not None:
        return 1.0 / r.variant.divisor
    return {
        "sqrt_dk": 1 / math.sqrt(d_k), "none": 1.0, "after_softmax": 1.0, "sqrt_dmodel": 1 / math.sqrt(r.ex.d_model),
        "dk": 1 / d_k, "times_dk": float(d_k), "times_sqrt_dk": math.sqrt(d_k),
    }[r.variant.scale]


def _scaled_floats(r: Replay, head: int | None) -> Array | None:
    """``scores / √d_k`` (or the variant's constant): ``[L, L_k]``."""
    (S,) = r.inputs(SCALED, head)
    return None if S is None else S * _scale_factor(r, head)


def _scaled_slack(r: Replay, head: int | None) -> Array:
    return r.delta(*SCALED.inputs(r.ex, head)[0]) * abs(_scale_factor(r, head))


def _scaled_production(run: LayerRun, ex: Exercise, head: int | None) -> Array:
    return run.scores[head]


def _scaled_exact_factor(w: ExactWalk, head: int | None) -> tuple[Fraction, int]:
    """The scale as ``(c, t)``: scores are multiplied by ``c·√t``."""
    d_k = w.ex.heads[head or 0].d_k

    def over_root(n: int) -> tuple[Fraction, int]:  # 1/√n = √t / (c·t) for √n = c·√t
        c, t = root(n)
        return Fraction(1, c * t), t

    return {
        "sqrt_dk": lambda: over_root(d_k), "none": lambda: (Fraction(1), 1),
        "sqrt_dmodel": lambda: over_root(w.ex.d_model), "dk": lambda: (Fraction(1, d_k), 1),
        "times_dk": lambda: (Fraction(d_k), 1), "times_sqrt_dk": lambda: (Fraction(root(d_k)[0]), root(d_k)[1]),
    }[w.variant.scale]()


def _scaled_exact(w: ExactWalk, head: int | None) -> em.Matrix | None:
    (S,) = w.inputs(SCALED, head)
    if S is None:
        return None
    c, t = _scaled_exact_factor(w, head)
    if any(isinstance(x, em.Value) for row in S for x in row):  # after a norm: the scores hold square roots
        root_t = em.Value.of(Fraction(1), t)
        return [[x * c if isinstance(x, Fraction) and t == 1 else em.as_value(x).scale(c) * root_t for x in row]
                for row in S]
    if t == 1:
        return [[x * c for x in row] for row in S]  # type: ignore[operator]
    return [[em.Value.of(x * c, t) for x in row] for row in S]  # type: ignore[operator]


def _scaled_work(sol: Solution, step: Step, i: int, j: int) -> str:
    scores = sol.step("scores", step.head)
    d_k = sol.exercise.heads[step.head or 0].d_k
    score = factor(scores.exact[i][j], scores.value[i][j])
    return (f"scores[{step.row_labels[i]}, {step.col_labels[j]}] / sqrt({d_k}) = {score} / sqrt({d_k}) "
            f"{total(step.exact[i][j], step.value[i][j])}")


def _scaled_arithmetic(sol: Solution, step: Step, places: int) -> tuple[Worked, ...]:
    scores = sol.step("scores", step.head)
    d_k = sol.exercise.heads[step.head or 0].d_k
    rows, cols = step.shape
    return tuple(Worked(entry_name(step, i, j), (f"{notation(factor(scores.exact[i][j], scores.value[i][j], places))} / √{d_k} "
                                                 f"{result(step.exact[i][j], step.value[i][j], places)}",))
                 for i in range(rows) for j in range(cols))


SCALED = StepKind(
    id="scaled", scope="head", op="/", exists=always,
    inputs=lambda ex, head: (("scores_absorbed" if ex.mla is not None else "scores", head),),  # MLA: the absorbed route
    build=_scaled, floats=_scaled_floats, slack=_scaled_slack, production=_scaled_production,
    rounding=_scaled_rounding, exact_walk=_scaled_exact,
    varies=frozenset({"scale", "divisor"}), work=_scaled_work, arithmetic=_scaled_arithmetic,
    given=lambda sol, step: (given_step(sol.step("scores", step.head)),),
    latex=r"\text{scaled} = \frac{\text{scores}}{\sqrt{d_k}}, \quad \sqrt{d_k} = \sqrt{$d_k}$root",
)


# --- biased: scaled + B (format v2) ---------------------------------------------------------------------


def _bias(ex: Exercise, head: int | None) -> tuple[tuple[Fraction, ...], ...]:
    assert ex.bias is not None  # the step exists only with a bias
    return ex.bias[head or 0]


def _biased_formula(ex: Exercise, head: int | None) -> str:
    if ex.alibi:
        h, H = head or 0, ex.num_heads
        k = 1 << (H.bit_length() - 1)  # the largest power of two up to H: its heads come first (get_slopes)
        i, n = (h + 1, k) if h < k else (2 * (h - k) + 1, 2 * k)  # then every other slope of 2k heads
        assert alibi_exponents(H)[h] == Fraction(8 * i, n)
        return f"biased = scaled + B,  B_ij = m·(j − i),  m = 2^(−8·{i}/{n}) = {frac_text(alibi_slope(h, H))}"
    return "biased = scaled + B"


def _biased(bd: Build, h: int | None) -> Step:
    ex = bd.ex
    (sc,) = bd.inputs(BIASED, h)
    assert isinstance(sc, Scaled)
    b = exact.biased(sc, _bias(ex, h))  # [L, L_k] = U·√t + B
    bd.data["biased", h] = b
    ops = (Operand("scaled", (ex.L, ex.L_k)), Operand("B", (ex.L, ex.L_k)))
    return Step("biased", h, "biased", _biased_formula(ex, h), ops, "+", b.exact(), ex.query_labels, ex.key_labels)


def _bias_matrix(r: Replay, head: int | None) -> Array | None:
    """The bias ``[L, L_k]`` as the variant adds it: ``-B`` under ``bias="negated"`` (ALiBi's distance as
    ``i - j``); under ``bias="shifted"`` ALiBi's slopes counted from head 0, ``2^(-8h/H)``, each head the
    slope of the head before it (the first 1): ``B·2^(8/H)``, for ``H`` a power of two; under
    ``bias="geometric"`` the power-of-two formula ``2^(-8(h+1)/H)`` used for an ``H`` that is not one (the
    paper's slopes then interleave two sequences: :func:`tutor.exercise.record.alibi_exponents`).
    ``None`` where the variant does not apply (a bias that is not ALiBi's, or the other kind of ``H``)."""
    B = floats(_bias(r.ex, head))  # [L, L_k]
    H = r.ex.num_heads
    power_of_two = H & (H - 1) == 0
    if r.variant.bias == "shifted":
        return B * 2.0 ** (8 / H) if r.ex.alibi and power_of_two else None
    if r.variant.bias == "geometric":
        if not r.ex.alibi or power_of_two:
            return None
        h = head or 0
        return B * 2.0 ** (float(alibi_exponents(H)[h]) - 8 * (h + 1) / H)  # B/m_h · 2^(-8(h+1)/H)
    return -B if r.variant.bias == "negated" else B


def _biased_floats(r: Replay, head: int | None) -> Array | object | None:
    """``scaled + B`` ``[L, L_k]``; left out under ``bias="after_softmax"`` (the bias is then added to the weights)."""
    if r.variant.bias == "after_softmax":
        return PASS
    (A,) = r.inputs(BIASED, head)
    B = _bias_matrix(r, head)
    if A is None or B is None or A.shape != B.shape:
        return None
    return A + B  # [L, L_k]


def _biased_slack(r: Replay, head: int | None) -> Array:
    return r.delta("scaled", head)


def _biased_production(run: LayerRun, ex: Exercise, head: int | None) -> Array:
    assert run.biased is not None
    return run.biased[head]


def _biased_rounding(r: Replay, head: int | None) -> Array:
    """The scaled scores' bound, plus one rounded addition (and the bias rounded to float64 once)."""
    return r.delta("scaled", head) + gamma(2) * (np.abs(r.value(("biased", head))) + magnitude(_bias(r.ex, head)))


def _biased_work(sol: Solution, step: Step, i: int, j: int) -> str:
    scaled = sol.step("scaled", step.head)
    B = _bias(sol.exercise, step.head)
    rl, cl = step.row_labels[i], step.col_labels[j]
    return (f"scaled[{rl}, {cl}] + B[{rl}, {cl}] = {factor(scaled.exact[i][j], scaled.value[i][j])} + "
            f"{factor(B[i][j], float(B[i][j]))} {total(step.exact[i][j], step.value[i][j])}")


def _biased_given(sol: Solution, step: Step) -> tuple[Input, ...]:
    ex = sol.exercise
    return (given_step(sol.step("scaled", step.head)), given_matrix("B", _bias(ex, step.head), ex.query_labels, ex.key_labels))


def _biased_why(step: Step, ex: Exercise) -> list[Text]:
    out: list[Text] = [Msg("step.biased.why")]
    if ex.alibi:
        out.append(Msg("step.biased.why.alibi"))
    return out


BIASED = StepKind(
    id="biased", scope="head", op="+", exists=lambda ex: ex.has_bias,
    inputs=lambda ex, head: (("scaled", head),),
    build=_biased, floats=_biased_floats, slack=_biased_slack, production=_biased_production,
    rounding=_biased_rounding,
    varies=frozenset({"bias"}), work=_biased_work, given=_biased_given, why=_biased_why,
    latex=r"\text{biased} = \text{scaled} + B", advanced=True,
)


# --- masked: + M, -inf where a query may not attend ---------------------------------------------------------


def _masked(bd: Build, h: int | None) -> Step:
    ex = bd.ex
    src = pre_mask(ex, h)[0]
    (sc,) = bd.inputs(MASKED, h)
    assert isinstance(sc, Scaled)
    live = exact.mask(sc, bd.allowed)  # [L, L_k], None where blocked
    bd.data["masked", h] = live
    ops = (Operand(src, (ex.L, ex.L_k)), Operand("M", (ex.L, ex.L_k)))
    return Step("masked", h, "masked", Msg("formula.masked", src=src),
                ops, "+", exact.masked_exact(live, sc), ex.query_labels, ex.key_labels)


def causal_variant(ex: Exercise, mask: str) -> list[list[bool]] | None:
    """A causal mask built wrongly, ``[L, L_k]`` (True = may attend), key padding applied as given:
    ``"diagonal"`` blocks the query's own key as well (``j < i'``), ``"upper"`` keeps the other triangle,
    the query's own key and those after it (``j >= i'``, blocking the past); ``i' = i + L_k - L`` for a
    lower-right mask, ``i`` for a top-left one.  ``None`` for an exercise without a causal mask."""
    if ex.mask_kind not in ("causal", "causal_lower_right"):
        return None
    offset = ex.L_k - ex.L if ex.mask_kind == "causal_lower_right" else 0
    pad = ex.key_padding or (True,) * ex.L_k
    return [[(j < i + offset if mask == "diagonal" else j >= i + offset) and pad[j] for j in range(ex.L_k)]
            for i in range(ex.L)]


def window_variant(ex: Exercise, mask: str) -> list[list[bool]] | None:
    """A sliding window built wrongly (issue 23), ``[L, L_k]`` (True = may attend), key padding applied as given:
    ``"window_wide"`` keeps ``p − W ≤ j`` (one key too many), ``"window_narrow"`` ``p − W + 1 < j`` (one too
    few), ``"window_acausal"`` the keys on both sides, ``|p − j| < W``, and ``"sinks_forgotten"`` the window
    alone; ``p = i + L_k − L`` is the query's position.  ``None`` for an exercise without a window, or without
    sinks under ``"sinks_forgotten"``."""
    if ex.mask_kind != "sliding_window" or ex.window is None or mask == "sinks_forgotten" and not ex.sinks:
        return None
    W, S, offset = ex.window, ex.sinks, ex.L_k - ex.L
    pad = ex.key_padding or (True,) * ex.L_k
    rules = {"window_wide": lambda p, j: j <= p and (p - W <= j or j < S),
             "window_narrow": lambda p, j: j <= p and (p - W + 1 < j or j < S),
             "window_acausal": lambda p, j: p - W < j < p + W or j < S,
             "sinks_forgotten": lambda p, j: p - W < j <= p}
    rule = rules[mask]
    return [[rule(i + offset, j) and pad[j] for j in range(ex.L_k)] for i in range(ex.L)]


WINDOW_MASKS = ("window_wide", "window_narrow", "window_acausal", "sinks_forgotten")


def keep(r: Replay, A: Array) -> Array | None:
    """The ``[L, L_k]`` booleans the variant applies (True = may attend), or ``None`` if it cannot apply:
    the mask inverted, aligned top-left (a decode step's), key padding applied to query rows, a causal mask
    that blocks the diagonal too or keeps the wrong triangle (:func:`causal_variant`)."""
    ex, v = r.ex, r.variant
    assert r.allowed is not None
    if A.shape != r.allowed.shape:
        return None
    if v.mask == "inverted":
        return ~r.allowed
    if v.mask in ("diagonal", "upper"):
        built = causal_variant(ex, v.mask)
        return None if built is None else np.array(built, dtype=bool)  # [L, L_k]
    if v.mask in WINDOW_MASKS:
        built = window_variant(ex, v.mask)
        return None if built is None else np.array(built, dtype=bool)  # [L, L_k]
    if v.mask == "top_left":  # a decode step's mask aligned top-left (format v2)
        if ex.mask_kind != "causal_lower_right" or ex.L == ex.L_k:
            return None
        top_left = np.tri(ex.L, ex.L_k, dtype=bool)  # [L, L_k]  j <= i
        return top_left if ex.key_padding is None else top_left & np.array(ex.key_padding, dtype=bool)[None, :]
    if v.mask == "padding_rows":
        if ex.key_padding is None or ex.L != ex.L_k:
            return None
        mask = np.ones(A.shape, bool) if ex.mask is None else np.array(ex.mask, dtype=bool)  # [L, L_k]
        return mask & np.array(ex.key_padding, dtype=bool)[:, None]  # padding on rows: [L, 1]
    return r.allowed


def _masked_floats(r: Replay, head: int | None) -> Array | object | None:
    """``scaled + M`` (``biased + M`` with a bias): ``-inf`` where the mask blocks (``[L, L_k]``); left out
    under ``mask="after_softmax"`` (the weights are then zeroed instead)."""
    if r.variant.mask == "after_softmax":
        return PASS
    (A,) = r.inputs(MASKED, head)
    if A is None:
        return None
    allowed = keep(r, A)
    if allowed is None:
        return None
    if r.variant.mask == "none":
        return A
    if r.variant.mask == "added":  # the booleans added as numbers: +1 where the query may attend, +0 where not
        return A + allowed.astype(np.float64)  # [L, L_k]
    return np.where(allowed, A, 0.0 if r.variant.mask == "zero" else -np.inf)  # [L, L_k]


def _masked_slack(r: Replay, head: int | None) -> Array:
    assert r.allowed is not None
    return np.where(r.allowed, r.delta(*pre_mask(r.ex, head)), 0.0)  # [L, L_k]


def _masked_production(run: LayerRun, ex: Exercise, head: int | None) -> Array:
    before = _SCORE_KINDS[pre_mask(ex, head)[0]].production(run, ex, head)  # format v2: the bias is added first
    return np.where(np.array(ex.allowed(), dtype=bool), before, -np.inf)  # [L, L_k]


def _masked_rounding(r: Replay, head: int | None) -> Array:
    return r.delta(*pre_mask(r.ex, head))  # blocked entries are -inf in both engines


def _exact_keep(w: ExactWalk, A: em.Matrix) -> list[list[bool]] | None:
    """:func:`keep`'s exact twin (the exact walk follows neither a top-left nor a cache)."""
    ex, v = w.ex, w.variant
    assert w.allowed is not None
    if (len(A), len(A[0])) != (len(w.allowed), len(w.allowed[0])):
        return None
    if v.mask == "inverted":
        return [[not a for a in row] for row in w.allowed]
    if v.mask in ("diagonal", "upper"):
        return causal_variant(ex, v.mask)
    if v.mask in WINDOW_MASKS:
        return window_variant(ex, v.mask)
    if v.mask == "padding_rows":
        if ex.key_padding is None or ex.L != ex.L_k:
            return None
        mask = [[True] * ex.L_k for _ in range(ex.L)] if ex.mask is None else [list(r) for r in ex.mask]
        return [[m and ex.key_padding[i] for m in row] for i, row in enumerate(mask)]
    return w.allowed


def _masked_exact(w: ExactWalk, head: int | None) -> em.Matrix | object | None:
    if w.variant.mask == "after_softmax":
        return PASS
    (A,) = w.inputs(MASKED, head)
    if A is None:
        return None
    allowed = _exact_keep(w, A)
    if allowed is None:
        return None
    if w.variant.mask == "none":
        return A
    if w.variant.mask == "added":  # the booleans added as numbers: +1 where the query may attend, +0 where not
        return [[em.as_value(a) + em.Value.of(Fraction(1)) if k else a for a, k in zip(ar, kr)] for ar, kr in zip(A, allowed)]
    blocked: em.Entry = em.ZERO if w.variant.mask == "zero" else em.NEG_INF
    return [[a if k else blocked for a, k in zip(ar, kr)] for ar, kr in zip(A, allowed)]


def _masked_work(sol: Solution, step: Step, i: int, j: int) -> Text:
    rl, cl = step.row_labels[i], step.col_labels[j]
    src = pre_mask(sol.exercise, step.head)[0]
    if math.isinf(step.value[i][j]):
        return Msg("practice.work.noted", work=f"{src}[{rl}, {cl}] + (-inf) = -inf",
                 note=Msg("practice.work.blocked", row=rl, col=cl))
    return Msg("practice.work.noted", work=f"{src}[{rl}, {cl}] + 0 {total(step.exact[i][j], step.value[i][j])}",
             note=Msg("practice.work.kept", row=rl, col=cl))


def _masked_given(sol: Solution, step: Step) -> tuple[Input, ...]:
    ex = sol.exercise
    allowed = ex.allowed()
    assert allowed is not None  # the step exists only with a mask
    m = Input("M", tuple(tuple("0" if a else "-inf" for a in row) for row in allowed),
              tuple(tuple(0.0 if a else -math.inf for a in row) for row in allowed), ex.query_labels, ex.key_labels)
    return (given_step(sol.step(*pre_mask(ex, step.head))), m)


def _masked_why(step: Step, ex: Exercise) -> list[Text]:
    out: list[Text] = [Msg("step.masked.why")]
    if ex.mask_kind == "causal_lower_right":
        out.append(Msg("step.masked.why.lower_right", L_q=ex.L, L_k=ex.L_k, offset=ex.L_k - ex.L))
    elif ex.mask_kind == "causal" and ex.L != ex.L_k:
        out.append(Msg("step.masked.why.upper_left", L_q=ex.L, L_k=ex.L_k))
    elif ex.mask_kind == "sliding_window":  # issue 23: the window and its sinks
        out.append(Msg("step.masked.why.window", W=ex.window))
        if ex.sinks:
            out.append(Msg("step.masked.why.sinks", S=ex.sinks))
    full = [step.row_labels[i] for i, row in enumerate(step.value) if all(math.isinf(v) for v in row)]
    if full:
        out.append(Msg("step.masked.why.full", rows=Msg.and_list(full), torch=torch_empty_row()))
    return out


def _masked_arithmetic(sol: Solution, step: Step, places: int) -> tuple[Worked, ...]:
    out = []
    for i, row in enumerate(step.value):
        kept = [step.col_labels[j] for j, v in enumerate(row) if not math.isinf(v)]
        blocked = [step.col_labels[j] for j, v in enumerate(row) if math.isinf(v)]
        parts = []
        if kept:
            parts.append(Msg("explain.work.kept", keys=Msg.joined("list.sep", kept)))
        if blocked:
            parts.append(Msg("explain.work.blocked", keys=Msg.joined("list.sep", blocked)))
        out.append(Worked(step.row_labels[i], (Msg.joined("list.sep.clauses", parts),), ": "))
    return tuple(out)


MASKED = StepKind(
    id="masked", scope="head", op="+", exists=lambda ex: ex.has_mask,
    inputs=lambda ex, head: (pre_mask(ex, head),),
    build=_masked, floats=_masked_floats, slack=_masked_slack, production=_masked_production,
    rounding=_masked_rounding, exact_walk=_masked_exact,
    varies=frozenset({"mask"}), work=_masked_work, given=_masked_given,
    arithmetic=_masked_arithmetic,
    why=_masked_why, fixed_by_mask=-math.inf,
    latex=r"\text{masked} = $op0 + M, \quad M_{ij} = $cases",  # op0: scaled, or biased with a bias (pre_mask)
)


#: The scores' kinds in the contract's order.
SCORE_STEPS: tuple[StepKind, ...] = (SCORES, SCALED, BIASED, MASKED)
_SCORE_KINDS = {k.id: k for k in SCORE_STEPS}
