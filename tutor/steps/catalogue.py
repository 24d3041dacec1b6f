"""The step catalogue: every kind of step in order, and the walks over an exercise's steps.

:data:`CATALOGUE` lists the kinds in the order of the exercise contract (per
head: ``q``, ``k_new``, ``v_new`` (a KV cache), ``k``, ``v``, ``scores``,
``scaled``, ``biased`` (an additive bias), ``masked``, ``weights``,
``head_output``; then the layer: ``concat``, ``output``).  Everything that
asks "which steps does this exercise have, in what order, computed from
what" asks here:

* :func:`keys`: an exercise's steps in order (head 0's steps, head 1's, ...,
  then the layer's), only those it has;
* :func:`inputs`, :func:`upstream`, :func:`downstream`: the step graph;
* :func:`solve`: the exact walk (every step's :attr:`StepKind.build`);
* :func:`replay`: the float walk (every step's :attr:`StepKind.floats`), under
  a misconception's variant, optionally over an author's own values;
* :class:`Walk`, :func:`exact_replay`: the float walk's exact twin (every
  step's :attr:`StepKind.exact_walk`), taken only as far as it is asked;
* :func:`worked_entry`: one entry worked out, by its kind.

The order is the families' own: :data:`~tutor.steps.projection.PROJECTIONS`,
:data:`~tutor.steps.scores.SCORE_STEPS`, :data:`~tutor.steps.softmax.SOFTMAX_STEPS`,
:data:`~tutor.steps.layer.LAYER`, then the backward pass's; a kind added to
its family's tuple is in the catalogue.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from functools import cache
from typing import TYPE_CHECKING

from ..base.errors import TutorError
from ..base.messages import Msg, Text
from ..exact import matrices as em
from ..exact.block import wrap
from ..exercise.record import Exercise
from .backward_head import HEAD_GRADS
from .backward_layer import AFTER_HEADS, BEFORE_HEADS
from .backward_projection import PROJECTION_GRADS
from .block import OUT_NORM, RESIDUAL, X_NORM
from .kind import StepKind
from .latent import C_KV, Q_ABSORBED, SCORES_ABSORBED
from .layer import LAYER
from .projection import PROJECTIONS
from .records import Key, Solution, Step
from .rope import ROPE_STEPS
from .scores import SCORE_STEPS
from .softmax import SOFTMAX_STEPS
from .state import PASS, READ_KNOBS, Build, ExactWalk, Replay
from .variant import RIGHT, Variant
from .worked import entry_name

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
else:
    from ..base.lazy import numpy as np


#: Every step kind, in the contract's order: the forward pass (k_new, v_new with a KV cache and biased with
#: a bias: format v2), then the backward pass (the layer's steps before the heads', the heads', the
#: projections' weights and biases, d_x).
#: The pre-norm block (issue 23, :mod:`tutor.steps.block`): ``x_norm`` first (a layer step before the heads, which
#: read it) and ``residual`` last.  Multi-head latent attention (format v3, :mod:`tutor.steps.latent`): ``c_kv``
#: next (an early layer step too: it reads X, the heads read it), each head's absorbed route after its explicit
#: scores, which it is checked equal to.  RoPE (format v3, :mod:`tutor.steps.rope`): ``q_rot``, ``k_rot`` after the
#: projections they turn (they read ``q``, ``k``), before ``scores``, which reads them.
FORWARD: tuple[StepKind, ...] = ((X_NORM, C_KV) + PROJECTIONS + ROPE_STEPS + SCORE_STEPS[:1] + (Q_ABSORBED, SCORES_ABSORBED)
                                 + SCORE_STEPS[1:] + SOFTMAX_STEPS + LAYER + (RESIDUAL, OUT_NORM))
BACKWARD: tuple[StepKind, ...] = BEFORE_HEADS + HEAD_GRADS + PROJECTION_GRADS + AFTER_HEADS
CATALOGUE: tuple[StepKind, ...] = FORWARD + BACKWARD
KINDS: dict[str, StepKind] = {k.id: k for k in CATALOGUE}
#: The step ids, in order; those of one head, those of the layer.
STEP_IDS: tuple[str, ...] = tuple(KINDS)
BACKWARD_IDS: tuple[str, ...] = tuple(k.id for k in BACKWARD)
HEAD_STEPS: tuple[str, ...] = tuple(k.id for k in CATALOGUE if k.scope == "head")
LAYER_STEPS: tuple[str, ...] = tuple(k.id for k in CATALOGUE if k.scope == "layer")


def kind(id: str) -> StepKind:
    """The kind of step ``id``.  Raises ``KeyError`` for an id the catalogue does not have."""
    return KINDS[id]


def exists(ex: Exercise, key: Key) -> bool:
    """Whether ``ex`` has the step ``key``: a known id, a head it has (``None`` for a layer step)."""
    id, head = key
    k = KINDS.get(id)
    if k is None or not k.exists(ex):
        return False
    if k.scope == "layer":
        return head is None
    return head is not None and 0 <= head < ex.num_heads


def keys(ex: Exercise, backward: bool = False) -> list[Key]:
    """Every step ``ex`` has, in order: each head's steps (head 0 first), then the layer's (an
    :attr:`~tutor.steps.StepKind.early` layer step, ``c_kv``, before the heads).

    With ``backward``, the backward pass follows: its layer steps before the
    heads (``d_output`` … ``d_b_o``), each head's, then ``d_x`` (``d_x_kv``).
    With grouped K/V heads the heads go group by group, and the K/V
    gradients of a group (:attr:`StepKind.per_kv_head`: the sum over its
    query heads) come after the other backward steps of all its heads.
    Raises :class:`~tutor.base.errors.TutorError` (exit 2) for the backward pass of an exercise with ``mla``.
    """
    early: list[Key] = [(k.id, None) for k in FORWARD if k.scope == "layer" and k.early and k.exists(ex)]
    per_head: list[Key] = [(k.id, h) for h in range(ex.num_heads) for k in FORWARD if k.scope == "head" and k.exists(ex)]
    out = early + per_head + [(k.id, None) for k in FORWARD if k.scope == "layer" and not k.early and k.exists(ex)]
    if backward and ex.mla is not None:  # the gradients of W_DKV, W_UK, W_UV are not built: refused, not half-shown
        raise TutorError(Msg("backward.mla", id=ex.id))
    if backward:
        live = [k for k in BACKWARD if k.exists(ex)]
        out += [(k.id, None) for k in live if k.scope == "layer" and not k.late]
        heads = [k for k in live if k.scope == "head"]
        if ex.grouped:
            for g in range(ex.num_kv_heads):
                group = ex.sharing(g)
                out += [(k.id, h) for h in group for k in heads if not k.per_kv_head]
                out += [(k.id, h) for h in group for k in heads if k.per_kv_head]
        else:
            out += [(k.id, h) for h in range(ex.num_heads) for k in heads]
        out += [(k.id, None) for k in live if k.scope == "layer" and k.late]
    return out


#: The largest ``num_heads·L·L_k²·d_model`` the exact backward pass is worked out for: its entries are sums
#: over query rows of N(e)/Z² with up to L_k² exponents each, so work and text grow with it (measured:
#: ~1 s of CPU at this size with ALiBi; 16 tokens, 8 heads, d_model = 32 took a minute and 96 MB of text).
#: Every hand-sized exercise (sizes at most 4: at most 4·4·16·4 = 1,024) is far below it.
MAX_BACKWARD_WORK = 16384


def backward_sized(ex: Exercise) -> None:
    """Raise :class:`~tutor.base.errors.TutorError` (exit 2) when ``ex`` is past :data:`MAX_BACKWARD_WORK`."""
    work = ex.num_heads * ex.L * ex.L_k ** 2 * ex.d_model
    if work > MAX_BACKWARD_WORK:
        raise TutorError(Msg("backward.too_big", id=ex.id, work=work, limit=MAX_BACKWARD_WORK, H=ex.num_heads,
                           L=ex.L, L_k=ex.L_k, d_model=ex.d_model))
    if ex.rope is not None:  # issue 23: RoPE's gradients carry cos/sin coefficients (entries of K_rot, Q_rot), and
        # R(mθ)ᵀ mixes them again: measured 25 times the work and text of the same exercise without RoPE (8 tokens,
        # 2 heads, d_k = d_model = 4: 9 s of CPU, 3.5 MB of text), so the work counts d_k once more
        d_k = max(h.d_k for h in ex.heads)
        if work * d_k > MAX_BACKWARD_WORK:
            raise TutorError(Msg("backward.too_big.rope", id=ex.id, work=work * d_k, limit=MAX_BACKWARD_WORK,
                                 H=ex.num_heads, L=ex.L, L_k=ex.L_k, d_model=ex.d_model, d_k=d_k))


def has_backward(ids: Iterable[str]) -> bool:
    """Whether any of the step ids is a backward step (a solution file, a practice ``--steps``)."""
    return any(KINDS[i].backward for i in ids if i in KINDS)


def inputs(ex: Exercise, key: Key) -> tuple[Key, ...]:
    """The steps ``key`` is computed from (``q``, ``k``, ``v`` come from the exercise: none)."""
    return KINDS[key[0]].inputs(ex, key[1])


def varies(ex: Exercise, key: Key) -> frozenset[str]:
    """The :class:`~tutor.steps.variant.Variant` knobs that change step ``key`` of ``ex`` directly: those its
    kind's float function reads (:attr:`StepKind.varies`), and those that change one of its inputs as it is
    read (a rounded or cut ``scaled`` or ``weights``, :data:`~tutor.steps.state.READ_KNOBS`).  A step none of
    whose knobs a variant turns, computed from inputs that are exactly the right ones, is exactly right."""
    out = KINDS[key[0]].varies
    for i in inputs(ex, key):
        out = out | READ_KNOBS.get(i[0], frozenset())
    return out


def upstream(ex: Exercise, key: Key) -> set[Key]:
    """Every step ``key`` depends on, directly or not."""
    out: set[Key] = set()
    todo = list(inputs(ex, key))
    while todo:
        k = todo.pop()
        if k not in out:
            out.add(k)
            todo += inputs(ex, k)
    return out


def downstream(ex: Exercise, start: Iterable[Key], backward: bool = False) -> list[Key]:
    """The steps of ``ex`` that are ``start`` or depend on one of them, in order (the backward pass's too)."""
    marked = set(start)
    out = []
    for key in keys(ex, backward):
        if key in marked or any(i in marked for i in inputs(ex, key)):
            marked.add(key)
            out.append(key)
    return out


# --- the walks ------------------------------------------------------------------------------


def solve(ex: Exercise, backward: bool = False) -> Solution:
    """Every step of ``ex``, exactly, in order (:func:`keys`).

    Shapes: ``q [L, d_k]``, ``k [L_k, d_k]``, ``v [L_k, d_v]``, ``scores``/
    ``scaled``/``masked``/``weights`` ``[L, L_k]``, ``head_output [L, d_v]``,
    ``concat [L, num_heads·d_v]`` (only with more than one head), ``output
    [L, d_out]`` (only with ``w_o``); with ``backward`` the gradients after them
    (:mod:`tutor.steps.backward_layer`, :mod:`~tutor.steps.backward_head`, :mod:`~tutor.steps.backward_projection`).  Source of the math: :mod:`tutor.exact.engine`, :mod:`tutor.exact.backward`.
    """
    if backward:
        no_block_backward(ex)
        backward_sized(ex)
    if ex.has_norm:
        return _solve_normed(ex)
    bd = Build(ex)
    if ex.post_norm:  # post-norm (issue 23): out_norm normalizes X + output, read as exact-walk values
        bd.data["residual", None] = Walk(ex, RIGHT).get(("residual", None))
    for key in keys(ex, backward):
        bd.steps[key] = KINDS[key[0]].build(bd, key[1])
    return Solution(ex, tuple(bd.steps.values()))


# --- the pre-norm block (issue 23) ------------------------------------------------------------------------


def no_block_backward(ex: Exercise) -> None:
    """Raise :class:`~tutor.base.errors.TutorError` (exit 2) for the backward pass of a pre-norm block: not built."""
    if ex.has_norm or ex.residual:
        raise TutorError(Msg("block.backward", id=ex.id))


def _solve_normed(ex: Exercise) -> Solution:
    """Every forward step of an exercise with a norm, exactly (:func:`solve`).

    After ``X_norm`` the rows of Q, K and V carry different square roots, so
    the scores of one row mix them and the structured softmax
    (:class:`tutor.exact.numbers.Mix`, one root per row) does not apply: each
    step's values are its exact walk's with no mistake (entries of
    :mod:`tutor.exact.expoly`, shown by :class:`tutor.exact.block.Alg`),
    and its record (name, formula, operands, labels) is the one its build
    gives on the same exercise without the norm, the projections reading
    ``X_norm`` in place of ``X``.
    """
    plain = replace(ex, norm=None, residual=False)
    bd, real = Build(plain), Build(ex)
    walk = Walk(ex, RIGHT)
    for key in keys(ex):
        kind = KINDS[key[0]]
        if kind is X_NORM or kind is RESIDUAL:
            step = kind.build(real, key[1])
        else:
            meta = bd.steps[key] = kind.build(bd, key[1])
            value = walk.get(key)
            assert value is not None  # the right walk reaches every step
            step = replace(meta, exact=tuple(tuple(wrap(e) for e in row) for row in value))
            if kind.id in ("q", "k", "v"):
                formula = step.formula.replace(" X·", " X_norm·") if isinstance(step.formula, str) else step.formula
                step = replace(step, formula=formula, operands=tuple(
                    replace(o, name="X_norm") if o.name == "X" else o for o in step.operands))
        real.steps[key] = step
    return Solution(ex, tuple(real.steps.values()))


Given = Callable[[Key], "tuple[NDArray, NDArray, NDArray] | None"]


def replay(ex: Exercise, variant: Variant | None = None, *, given: Given | None = None,
           backward: bool = False) -> Replay:
    """Every step of ``ex`` in float64, as computed under ``variant`` (the right answer by default).

    The result's ``values`` maps each key to its ``[rows, cols]`` float64
    value; a step the variant cannot reach (shapes that no longer chain) is
    absent, and so is everything computed from it; a step it leaves out
    (:data:`~tutor.steps.state.PASS`) is in ``passed``.

    With ``given`` (``check``): after each step is computed from the values
    before it, ``given(key)`` may return ``(mid, half, missing)``, the
    author's own value of that step, the half-width each entry claims, and
    the entries the author left out (booleans); the author's entries then
    replace the computed ones for the steps after.  The result's ``computed`` maps each
    key to ``(value from the carried inputs [r, c], slack [r, c])``: what the
    author's inputs give and how far their rounding can move it.
    Each step's function is its kind's :attr:`StepKind.floats` (and :attr:`StepKind.slack`).
    """
    v = variant or RIGHT
    r = Replay(ex, v, slack={} if given is not None else None,
               right=cache(lambda: replay(ex)) if v != RIGHT else None)
    for key in keys(ex, backward):
        k, head = KINDS[key[0]], key[1]
        with np.errstate(over="ignore", invalid="ignore"):  # a variant's exp of raw scores may overflow: inf never matches
            value = k.floats(r, head)
        if value is PASS:
            r.passed[key] = k.inputs(ex, head)[0]
            continue
        if value is None:
            continue
        assert isinstance(value, np.ndarray)
        r.values[key] = value
        if given is None:
            continue
        assert r.slack is not None
        with np.errstate(invalid="ignore", over="ignore"):  # the author's values may hold ±inf
            slack = np.nan_to_num(k.slack(r, head), nan=0.0, posinf=1e300)
        r.computed[key] = (value, slack)
        r.slack[key] = slack
        author = given(key)
        if author is not None and author[0].shape == value.shape:
            mid, half, missing = author
            r.values[key] = np.where(missing, value, mid)
            r.slack[key] = np.where(missing, slack, half)
    return r


# --- the exact walk under a variant ---------------------------------------------------------------------------

#: The knobs of :class:`~tutor.steps.variant.Variant` the exact walk follows; a variant turning any other
#: (the heads averaged, split or merged by a plain reshape; format v2's kv_order, cache, bias) has no exact
#: walk (:class:`NoExactForm`), nor have ``mask="top_left"`` and ``scale="after_softmax"`` (:func:`supports`).
EXACT_KNOBS = frozenset({"drop", "kq", "scale", "mask", "empty_rows", "softmax", "softmax_axis", "normalise",
                         "round_scaled", "round_weights", "truncate", "values", "heads_reversed", "w_o_transposed",
                         "uk_untransposed", "norm_axis", "norm_mean", "residual", "post_norm"})


class NoExactForm(Exception):
    """The exact walk does not follow one of the variant's knobs: decide by the floats (and say so)."""


def supports(variant: Variant, ex: Exercise | None = None) -> bool:
    """Whether :class:`Walk` follows every knob ``variant`` turns (and, given ``ex``, its exercise).

    Format v2 (issue 12) is followed only where it changes nothing the walk
    computes: grouped K/V heads in repeat_interleave order (each query head
    holds its K/V head's weights) and the lower-right causal mask (in
    ``ex.allowed()``).  A KV cache (``k_new``, ``v_new``, K and V appended
    to the cache), a bias (the ``biased`` step), and the knobs of its
    misconceptions (``kv_order``, ``cache``, ``bias``, ``mask="top_left"``)
    have no exact walk, nor has ``scale="after_softmax"`` (weights over an
    irrational √d_k): the floats decide.
    """
    if not variant.turned() <= EXACT_KNOBS or variant.mask == "top_left" or variant.scale == "after_softmax":
        return False
    # RoPE (format v3): its exponents contain cos and sin, not algebraic numbers: no exact walk, the floats decide
    return ex is None or not (ex.has_cache or ex.has_bias or ex.rope is not None)


class Walk:
    """The exact walk of ``ex`` under ``variant``, taken only as far as it is asked (:meth:`get`).

    A step is computed with the steps it depends on (:func:`upstream`) and
    its head's projections, nothing else: asking for head 1's scaled scores
    does not compute head 0's softmax.  Each step's function is its kind's
    :attr:`StepKind.exact_walk`; entries are :mod:`tutor.exact.matrices` values.
    Raises :class:`NoExactForm` for a variant or exercise it does not follow (:func:`supports`).
    """

    def __init__(self, ex: Exercise, variant: Variant):
        if not supports(variant, ex):
            turned = sorted(variant.turned() - EXACT_KNOBS) or [
                f"mask={variant.mask}" if variant.mask == "top_left" else
                f"scale={variant.scale}" if variant.scale == "after_softmax" else "a KV cache or a bias (format v2)"]
            raise NoExactForm(f"no exact walk under {', '.join(turned)}")
        self._ex = ex
        self._walk = ExactWalk(ex, variant)
        self._done: set[Key] = set()
        self._order = {k: n for n, k in enumerate(keys(ex))}
        self._failed: ArithmeticError | None = None

    def get(self, key: Key) -> em.Matrix | None:
        """Step ``key`` exactly, or ``None`` when the variant cannot reach it (or the exercise has no such step).

        Raises :class:`~tutor.exact.expoly.TooLarge` when a step is more work than its budget allows
        (:func:`tutor.exact.expoly.budget`), and again at every later call: a walk broken off is never
        taken for one that found nothing."""
        if self._failed is not None:
            raise self._failed
        if key not in self._order:
            return None
        heads = range(self._ex.num_heads) if key[1] is None else (key[1],)
        projections = {(p, h) for h in heads for p in ("q", "k", "v")}
        needed = upstream(self._ex, key) | {key} | projections
        needed |= {u for p in projections for u in upstream(self._ex, p)}  # MLA: K and V read the latent c_kv
        for k in sorted(needed, key=self._order.__getitem__):
            if k not in self._done:
                self._done.add(k)
                try:
                    self._step(k)
                except ArithmeticError as err:  # TooLarge (and an overflow): this walk stops here for good
                    self._failed = err
                    raise
                except NoExactForm:  # a step with no exact walk (out_norm): asked again, it says so again
                    self._done.discard(k)
                    raise
        return self._walk.values.get(key)

    def _step(self, k: Key) -> None:
        """Compute step ``k`` (its inputs done), recording its value or that the variant left it out."""
        kind = KINDS[k[0]]
        if kind.exact_walk is None:  # post-norm's out_norm (issue 23): its roots of sums are no Values
            raise NoExactForm(f"no exact walk of {k[0]}")
        value = kind.exact_walk(self._walk, k[1])
        if value is PASS:
            self._walk.passed[k] = kind.inputs(self._ex, k[1])[0]
        elif value is not None:
            self._walk.values[k] = value  # type: ignore[assignment]


def exact_replay(ex: Exercise, variant: Variant) -> dict[Key, em.Matrix]:
    """Every step of ``ex`` under ``variant``, exactly, in order (the steps a variant cannot reach left out, and
    those of a kind with no exact walk: post-norm's ``out_norm``).

    Mirrors :func:`replay`; shapes as there.  Raises :class:`NoExactForm` as :class:`Walk`.
    """
    w = Walk(ex, variant)
    out = {}
    for key in keys(ex):
        if KINDS[key[0]].exact_walk is None:  # out_norm (issue 23): Walk.get says NoExactForm for it
            continue
        value = w.get(key)
        if value is not None:
            out[key] = value
    return out


def rounding_bounds(sol: Solution) -> dict[Key, NDArray]:
    """How far float64 may move each step of ``sol`` when the batched layer computes it: each kind's
    :attr:`StepKind.rounding`, carried through the steps in order from the exact values (Higham's forward
    error bounds, :mod:`tutor.steps.rounding`).  ``[rows, cols]`` per key, the step's shape."""
    bounds = Replay(sol.exercise, slack={})  # the exact values of the steps so far, and their bounds
    assert bounds.slack is not None
    for step in sol.steps:
        bounds.values[step.key] = np.array(step.value, dtype=np.float64)
        bounds.slack[step.key] = KINDS[step.id].rounding(bounds, step.head)
    return bounds.slack


def worked_entry(sol: Solution, step: Step, i: int, j: int) -> str:
    """Entry ``(i, j)`` of ``step`` worked out with its products, in answer-grammar notation:
    ``scores[t1, t2] = Q[t1, :]·K[t2, :] = 1·2 + 1·2 = 4``."""
    return f"{entry_name(step, i, j)} = {entry_work(sol, step, i, j)}"


def entry_work(sol: Solution, step: Step, i: int, j: int) -> Text:
    """How entry ``(i, j)`` of ``step`` is made from the steps before it, with its value:
    ``Q[t1, :]·K[t2, :] = 1·2 + 1·2 = 4`` (the right-hand side of :func:`worked_entry`)."""
    return KINDS[step.id].work(sol, step, i, j)


def blocked_cells(sol: Solution, step: Step) -> frozenset[tuple[int, int]]:
    """The cells of ``step`` whose value a mask fixes exactly: the keys a query may not attend
    to, in the steps whose kind says what a mask fixes there (:attr:`tutor.steps.StepKind.fixed_by_mask`:
    ``masked`` ``-inf``, ``weights`` ``0``).  Every other step, and an exercise without a mask, has none.

    These entries are exact by construction, not computed, so no rounding
    (nor ``--tolerance``) applies to them: a weight of 0.0035 on a masked key
    is wrong.  Other entries that come out exact (a weight of 1 on a query's
    only allowed key, whole-number products) are graded by the rule: a
    decimal near them is an honest rounding of a computation.
    """
    allowed = sol.exercise.allowed()  # [L, L_k], True = may attend
    if allowed is None or KINDS[step.id].fixed_by_mask is None:
        return frozenset()
    return frozenset((i, j) for i, row in enumerate(allowed) for j, ok in enumerate(row) if not ok)
