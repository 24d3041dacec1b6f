"""Which mistakes an exercise cannot catch: the misconceptions that give exactly the right matrix.

On the classic example Q = K, so ``K·Qᵀ`` *is* ``Q·Kᵀ``: a learner who
multiplies the wrong way round gets every step right, and no check can tell.
For every step of an exercise, :func:`invisible` lists the misconceptions of
the catalogue (:data:`tutor.mistakes.diagnose.MISCONCEPTIONS`) that can change that
step and yet give exactly its right value there.

Exactly: each misconception's step is recomputed in floats (the one float
pipeline, :func:`tutor.steps.replay`); where it clearly differs from the right
value (by more than :data:`CLEAR` of the matrix's magnitude, far beyond
float round-off) the mistake shows.  Anything closer is decided by the exact
walk (:class:`tutor.steps.Walk`, values as :class:`tutor.exact.expoly.Value`) and
the Lindemann–Weierstrass theorem, never by a tolerance.

:func:`notes` turns the core mistakes (:data:`CORE`) into the sentences
``explain`` and ``practice`` show at the step where each is made ("On this
exercise K·Qᵀ = Q·Kᵀ because Q = K …; try ``single-head-asym-3x4`` to be
tested on it"), :func:`uncaught` into what ``validate`` tells an instructor.
Pure: no printing, no I/O beyond reading the bundled exercises for a
suggestion.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from ..base.messages import Msg, Text
from ..exact.expoly import TooLarge, budget
from ..exercise.record import Exercise
from ..steps import KINDS, Key, Solution, downstream, inputs, keys, replay, rounding_bounds, upstream, varies
from .diagnose import MISCONCEPTIONS, Misconception, needs_met, same_numbers

#: A float difference larger than this fraction of the matrix's magnitude is a real one (no round-off is that large).
CLEAR = 1e-6

#: The classic mistakes an exercise should be able to catch: what ``explain``, ``practice`` and ``validate`` name.
CORE: tuple[str, ...] = (
    "kq_transposed", "no_scaling", "scale_sqrt_d_model", "softmax_columns", "w_o_transposed",
    "mask_inverted", "no_mask", "times_k", "heads_order",
)

#: RoPE's mistakes (format v3, issue 23) ``validate`` names when a RoPE exercise cannot catch them: with
#: d_k = 2 the two pairings coincide (one pair, (0, 1)) and θ_0 = base^0 = 1 with or without the 2.
#: The two layouts mixed (rotate_half with the interleaved layout's angles, or the reverse) coincide with d_k = 2 too.
CORE_ROPE: tuple[str, ...] = ("rope_pairing_mixed", "rope_half_interleaved_angles", "rope_interleaved_half_angles",
                              "rope_positions_from_one", "rope_theta_without_two", "rope_v_rotated")

#: What ``validate`` names (:func:`uncaught`): the core mistakes, and RoPE's for an exercise with RoPE.
VALIDATED: tuple[str, ...] = CORE + CORE_ROPE

#: The backward pass's core mistakes: noted too when a session or explanation has the gradients.
CORE_BACKWARD: tuple[str, ...] = ("softmax_grad_elementwise", "grad_no_scale", "d_k_not_transposed", "kv_grad_not_summed")

Array = NDArray[np.float64]

if TYPE_CHECKING:
    from ..steps import Walk


@dataclass(frozen=True)
class Invisible:
    """Misconception ``key`` gives exactly the right matrix at step ``step``.

    ``exact`` is False when the exact test had too many terms to multiply out
    and was made at 60 significant digits instead (:meth:`tutor.exact.expoly.Value.equals`).
    """

    key: str
    step: Key
    exact: bool = True


def _clearly_differ(got: Array, right: Array) -> bool:
    """Whether two float matrices of one shape differ beyond any round-off (``-inf`` only equal to ``-inf``)."""
    inf = np.isinf(got) | np.isinf(right)
    if not np.array_equal(got[inf], right[inf]):
        return True
    finite = np.concatenate([np.abs(got[~inf]), np.abs(right[~inf]), [1.0]])
    return bool(np.any(np.abs(got[~inf] - right[~inf]) > CLEAR * finite.max()))


#: How many times the right step's float64 error bound two float computations of it may differ by and
#: still count as the same (the mistake's own computation rounds too, in another order).
SAFETY = 8.0


def _floats_agree(got: Array, right: Array, bound: Array) -> bool:
    """Whether two float matrices of one shape are the same to float64's precision: entry by entry within
    :data:`SAFETY` times the right step's error bound ``bound`` (:func:`tutor.steps.rounding_bounds`),
    ``-inf`` only equal to ``-inf``.  The verdict when no exact one can be made: it scales with the
    exercise's numbers, so tiny ones are compared at their own scale, and a sum that cancels to 0 (d_b_K)
    is 0 whatever its round-off."""
    inf = np.isinf(got) | np.isinf(right)
    if not np.array_equal(got[inf], right[inf]):
        return False
    with np.errstate(invalid="ignore"):
        close = np.abs(got - right) <= SAFETY * np.broadcast_to(bound, right.shape)
    return bool(np.all(close | inf))


def _same_exactly(a: Sequence[Sequence[object]], b: Sequence[Sequence[object]]) -> tuple[bool, bool]:
    """``(equal, exact)`` for two exact matrices (:mod:`tutor.exact.matrices` entries)."""
    from fractions import Fraction

    from ..exact.expoly import NEG_INF
    from ..exact.matrices import as_value

    exact = True
    for ra, rb in zip(a, b):
        for x, y in zip(ra, rb):
            if x is NEG_INF or y is NEG_INF:
                same = x is y
            elif isinstance(x, Fraction) and isinstance(y, Fraction):
                same = x == y
            else:
                same, decided = as_value(x).equals(as_value(y))  # type: ignore[arg-type]
                exact &= decided
            if not same:
                return False, exact
    return True, exact


class _Exact:
    """The exact walks of one exercise, made only when a float comparison cannot decide."""

    def __init__(self, ex: Exercise, bounds: dict[Key, Array]):
        self.ex = ex
        self.bounds = bounds  # each step's float64 error bound: how close floats must be to count as the same
        self.walks: dict[str, Walk] = {}

    def walk(self, m: Misconception | None) -> Walk:
        """The exact walk under ``m``'s variant (the right one for ``None``), taken only as far as asked."""
        from ..steps import RIGHT, Walk

        name = "" if m is None else m.key
        if name not in self.walks:
            self.walks[name] = Walk(self.ex, RIGHT if m is None else (m.variant or RIGHT))
        return self.walks[name]

    def special(self, key: str, step: Key) -> list | None:
        """The exact value of a misconception that is no variant of the pipeline, or ``None`` when unknown."""
        from ..exact.matrices import transpose

        right = self.walk(None)
        if key == "transposed":
            value = right.get(step)
            return None if value is None else transpose(value)
        if key == "mask_in_scaled":
            return right.get(("masked", step[1]))
        return None


def invisible(sol: Solution, only: Sequence[str] | None = None) -> list[Invisible]:
    """Every (misconception, step) of ``sol``'s exercise where the misconception can change the step
    and yet gives exactly its right value, in catalogue order, then step order (only the
    misconceptions whose keys are in ``only``, when given).

    A misconception that does not apply to the exercise (no bias to forget,
    a W_O that is not square) or cannot reach a step (shapes that no longer
    chain) is not listed there: it is not invisible, it cannot be made.
    """
    ex = sol.exercise
    # with the backward pass (explain --backward, practice --backward) its gradients too: the float walk
    # decides there (the exact walk follows the forward pass only)
    backward = any(KINDS[s.id].backward for s in sol.steps)
    right = {s.key: np.array(s.value, dtype=np.float64) for s in sol.steps}
    exact = _Exact(ex, rounding_bounds(sol))
    found: list[Invisible] = []
    with budget():  # the exact walks of every mistake together: past it the floats decide (TooLarge, below)
        for m in MISCONCEPTIONS:
            _one(sol, m, only, backward, right, exact, found)
    return found


def _one(sol: Solution, m: Misconception, only: Sequence[str] | None, backward: bool, right: dict[Key, Array],
         exact: _Exact, found: list[Invisible]) -> None:
    """:func:`invisible` for misconception ``m``: the steps where it gives exactly the right value, added to ``found``."""
    ex = sol.exercise
    if (only is not None and m.key not in only) or not needs_met(sol, m.needs):
        return
    where = downstream(ex, origins(m, ex, backward), backward) if m.variant is not None else origins(m, ex)
    if not where:
        return
    walked: dict[Key, Array] | None = None
    turned: frozenset[str] = frozenset()
    if m.variant is not None:
        turned = m.variant.turned()
        with np.errstate(all="ignore"):  # a mistake may overflow (exp without the softmax's shift): inf is its answer
            walked = replay(ex, m.variant, backward=backward).values
    affected = set(where)
    same_as_right: dict[Key, bool] = {}  # decided exactly, step by step
    for k in where:
        got = walked.get(k) if walked is not None else m.recompute(sol, k[0], k[1])
        if got is None or got.shape != right[k].shape or _clearly_differ(got, right[k]):
            same_as_right[k] = False
            continue
        if m.variant is not None and not varies(ex, k) & turned and all(
                same_as_right.get(i, i not in affected) for i in inputs(ex, k)):
            same, decided = True, True  # the same computation on exactly the same inputs
        else:
            same, decided = _exactly_right(exact, m, k, got, right[k])
        same_as_right[k] = same
        if same:
            found.append(Invisible(m.key, k, exact=decided))


def _exactly_right(exact: _Exact, m: Misconception, k: Key, got: Array, right: Array) -> tuple[bool, bool]:
    """``(same, exact)``: whether misconception ``m`` gives exactly the right value at step ``k``
    (``got`` and ``right`` its float values, which do not clearly differ).

    A misconception with no exact form (none today) keeps the float verdict, ``exact`` False;
    so does a computation too large to carry out exactly (:class:`tutor.exact.expoly.TooLarge`), and a
    variant the exact walk does not follow (:class:`tutor.steps.NoExactForm`): the floats then decide
    as closely as they can (:func:`_floats_agree`).
    """
    from ..steps import NoExactForm

    if KINDS[k[0]].backward:  # no exact walk of the backward pass under a mistake: the floats decide, and that is said
        return _floats_agree(got, right, exact.bounds[k]), False
    try:
        mine = exact.walk(m).get(k) if m.variant is not None else exact.special(m.key, k)
        if mine is None:  # no exact form of a special misconception: the floats decide
            return m.variant is None and _floats_agree(got, right, exact.bounds[k]), False
        right_exact = exact.walk(None).get(k)
        assert right_exact is not None
        return _same_exactly(mine, right_exact)
    except (TooLarge, NoExactForm):  # beyond what is worth computing exactly, or a mistake the exact walk does
        return _floats_agree(got, right, exact.bounds[k]), False  # not follow (the heads' layout): the floats decide, as said


def by_step(sol: Solution) -> dict[Key, tuple[str, ...]]:
    """:func:`invisible` as every step's misconception keys (``()`` where every mistake shows)."""
    out: dict[Key, list[str]] = {s.key: [] for s in sol.steps}
    for inv in invisible(sol):
        out[inv.step].append(inv.key)
    return {k: tuple(v) for k, v in out.items()}


#: The steps where each RoPE mistake is made: the rotations, or V for rotating V (the knob ``rope`` is read by
#: ``q_rot``, ``k_rot`` and ``v`` alike, so the knobs alone would say every mistake is made at all three).
_ROPE_MADE_AT = {"rope_pairing_mixed": ("q_rot", "k_rot"), "rope_positions_from_one": ("q_rot", "k_rot"),
                 "rope_theta_without_two": ("q_rot", "k_rot"), "rope_v_rotated": ("v",),
                 "rope_half_interleaved_angles": ("q_rot", "k_rot"), "rope_interleaved_half_angles": ("q_rot", "k_rot")}

#: The step a left-out bias changes first.
_BIAS_STEP = {"b_q": "q", "b_k": "k", "b_v": "v", "b_o": "output"}


def origins(m: Misconception, ex: Exercise, backward: bool = False) -> list[Key]:
    """The steps where a learner *makes* mistake ``m``: the first steps its knobs turn (those not computed
    from another such step: one per head in the forward pass),
    the projection whose bias it leaves out, or every step it names when it is no variant of the
    pipeline (``backward``: the backward pass's steps too)."""
    if m.variant is None:
        return [k for k in keys(ex) if k[0] in m.steps]
    if m.key in _ROPE_MADE_AT:  # one knob, ``rope``, turns V too: where each RoPE mistake is made is its own
        return [k for k in keys(ex) if k[0] in _ROPE_MADE_AT[m.key]]
    turned = m.variant.turned()
    if turned == {"drop"}:
        biased = {_BIAS_STEP[b] for b in m.variant.drop}
        return [k for k in keys(ex) if k[0] in biased]
    first: list[Key] = []  # each step a knob turns that is not computed from an earlier one (d_q and d_k both)
    for k in keys(ex, backward):
        if varies(ex, k) & turned and not upstream(ex, k) & set(first):
            first.append(k)
    return first


# --- sentences ------------------------------------------------------------------------------------

_BY_KEY = {m.key: m for m in MISCONCEPTIONS}


def reason(key: str, sol: Solution, step: Key) -> Text:
    """The reason a core mistake is invisible on this exercise, when it is a simple one (else ``""``)."""
    ex, head = sol.exercise, step[1]
    hd = ex.heads[head or 0]
    if key == "kq_transposed":
        same = sol.step("q", head).exact == sol.step("k", head).exact
        return Msg("invisible.because.q_is_k" if same else "invisible.because.symmetric")
    if key in ("no_scaling", "grad_no_scale") and hd.d_k == 1:
        return Msg("invisible.because.d_k_1")
    if key == "scale_sqrt_d_model" and hd.d_k == ex.d_model:
        return Msg("invisible.because.d_model_d_k")
    if key == "times_k" and sol.step("k", head).exact == sol.step("v", head).exact:
        return Msg("invisible.because.k_is_v")
    if key == "w_o_transposed" and ex.w_o is not None and tuple(zip(*ex.w_o)) == ex.w_o:
        return Msg("invisible.because.w_o_symmetric")
    allowed = ex.allowed()
    if key == "no_mask" and allowed is not None and all(all(row) for row in allowed):
        return Msg("invisible.because.blocks_nothing")
    if key in _D_K_2 and ex.rope is not None and hd.d_k == 2:
        return Msg(f"invisible.because.{key}.d_k_2")
    return ""


#: RoPE's mistakes d_k = 2 cannot show, each with its reason (``invisible.because.<key>.d_k_2``).
_D_K_2 = ("rope_pairing_mixed", "rope_half_interleaved_angles", "rope_interleaved_half_angles", "rope_theta_without_two")


def note(sol: Solution, key: str, step: Key, suggestion: str | None, exact: bool = True) -> Text:
    """The sentence saying that mistake ``key`` cannot be caught at ``step`` of this exercise, with a
    bundled exercise that does catch it (``suggestion``) when there is one.  ``exact`` False: the
    floats decided (:attr:`Invisible.exact`), which the sentence says unless a reason shows it exactly."""
    name = sol.step(*step).name
    because = reason(key, sol, step)
    if not exact and not because:
        because = Msg("invisible.because.floats")
    text = Msg(f"invisible.{key}", step=name, because=because) if key in _SPECIFIC else \
        Msg("invisible.generic", mistake=Msg(f"invisible.mistake.{key}"), step=name, because=because)
    if not suggestion:
        return text
    # a mistake made in the backward pass shows only when the suggested exercise is practised with --backward
    return Msg.sentences([text, Msg("invisible.try.backward" if in_backward(step[0]) else "invisible.try", id=suggestion)])


_SPECIFIC = ("kq_transposed",)


def notes(sol: Solution, found: Sequence[Invisible] | None = None, *,
          suggest: Callable[[str, str, str], str | None] | None = None) -> dict[Key, list[Text]]:
    """The sentences to show at each step: every core mistake (:data:`CORE`) invisible where it is made.

    ``suggest(key, step_id, exercise_id)`` names an exercise that catches it
    (default :func:`suggestion`, among the bundled ones).
    """
    ex = sol.exercise
    suggest = suggest or suggestion
    backward = any(KINDS[s.id].backward for s in sol.steps)
    core = CORE + CORE_BACKWARD if backward else CORE
    found = invisible(sol, core) if found is None else found
    hidden = {(f.key, f.step): f.exact for f in found}
    out: dict[Key, list[Text]] = {}
    for key in core:
        m = _BY_KEY.get(key)
        if m is None:
            continue
        for step in origins(m, ex, backward):
            if (key, step) in hidden:
                out.setdefault(step, []).append(note(sol, key, step, suggest(key, step[0], ex.id), hidden[key, step]))
    return out


def uncaught(sol: Solution, found: Sequence[Invisible] | None = None) -> list[tuple[str, tuple[Key, ...]]]:
    """The mistakes ``validate`` names (:data:`VALIDATED`: the core ones, RoPE's with RoPE) this exercise
    cannot catch at the steps where they are made: ``(key, steps)`` for each one that applies to the
    exercise and is invisible at every such step (``found``: :func:`invisible` over :data:`VALIDATED`)."""
    ex = sol.exercise
    found = invisible(sol, VALIDATED) if found is None else found
    hidden = {(f.key, f.step) for f in found}
    out = []
    for key in VALIDATED:
        m = _BY_KEY.get(key)
        if m is None or not needs_met(sol, m.needs):
            continue
        steps = origins(m, ex)
        if steps and all((key, s) in hidden for s in steps):
            out.append((key, tuple(steps)))
    return out


@lru_cache(maxsize=1)
def _bundled_order() -> tuple[Exercise, ...]:
    """The bundled exercises in learning order: difficulty, then size, then id."""
    from ..exercise.catalog import bundled

    return tuple(sorted(bundled(), key=lambda e: (e.difficulty or 3, e.L * e.L_k * e.d_model, e.id)))


@cache
def _solved(ex: Exercise) -> tuple[Solution, bool]:
    """``ex`` solved with its backward pass when it has one (then ``True``), else forward only."""
    from ..base.errors import TutorError
    from ..steps import solve

    try:
        return solve(ex, backward=True), True  # the gradients too: the backward pass's mistakes are suggested like the others
    except TutorError:  # the pre-norm block's and MLA's backward pass are refused (in one line): forward mistakes only
        return solve(ex, backward=False), False


@cache
def _catches(ex: Exercise) -> frozenset[tuple[str, str]]:
    """The (mistake, step id) pairs exercise ``ex`` catches at a step where the mistake is made."""
    sol, bw = _solved(ex)
    hidden = {(f.key, f.step) for f in invisible(sol)}
    caught = set()
    for m in MISCONCEPTIONS:
        if not needs_met(sol, m.needs):
            continue
        with np.errstate(all="ignore"):
            reached = replay(ex, m.variant, backward=bw).values if m.variant is not None else None
        for step in origins(m, ex, bw):
            if (m.key, step) in hidden:
                continue
            if step in reached if reached is not None else _shows(sol, m, step):
                caught.add((m.key, step[0]))
    return frozenset(caught)


def _shows(sol: Solution, m: Misconception, step: Key) -> bool:
    """Whether misconception ``m``, no variant of the pipeline, can be made at ``step`` of ``sol`` and shows
    there (:func:`invisible` has not found it to give exactly the right value): a judge's mistake whenever it
    applies (it is recognised from the answer's signature); a family's when one of its values clearly differs
    from the right one (none for ``√d_k`` rounded when d_k is a perfect square); any other when it has a value
    there at all (``mask_in_scaled`` has none without a mask) -- never counted caught for want of a value."""
    if m.judge is not None:
        return True
    right = np.array(sol.step(*step).value, dtype=np.float64)  # [rows, cols]
    with np.errstate(all="ignore"):
        found = m.candidates(sol, step[0], step[1])
    if m.family is None:
        return bool(found)
    return any(got.shape != right.shape or _clearly_differ(got, right) for _, got in found)


def learning_order() -> tuple[Exercise, ...]:
    """The bundled exercises in learning order: difficulty, then size, then id (what :func:`suggestion` walks)."""
    return _bundled_order()


def in_backward(step_id: str) -> bool:
    """Whether a mistake made at step ``step_id`` is made in the backward pass (a gradient step): the exercise
    :func:`suggestion` names for it tests it only under ``--backward`` (explain, practice)."""
    kind = KINDS.get(step_id)
    return kind is not None and kind.backward


def suggestion(key: str, step_id: str, exercise_id: str) -> str | None:
    """The first bundled exercise (in learning order) other than ``exercise_id`` on which mistake
    ``key`` shows at a step ``step_id`` where it is made; ``None`` when there is none."""
    for ex in _bundled_order():
        if ex.id != exercise_id and (key, step_id) in _catches(ex):
            return ex.id
    return None


def comparable(keys: Sequence[str]) -> tuple[str, ...]:
    """The mistakes of ``keys`` :func:`apart` compares: those of the catalogue with one value (not a family), each once."""
    return tuple(k for k in dict.fromkeys(keys) if k in _BY_KEY and _BY_KEY[k].family is None)


def apart(keys: Sequence[str], step_id: str, exercise_id: str) -> tuple[str, tuple[str, ...]] | None:
    """Where the mistakes ``keys``, which one answer could not tell apart (:func:`tutor.mistakes.diagnose.event`),
    give different numbers: the first bundled exercise (in learning order) other than ``exercise_id`` on which each
    of those with one value (not a family: ``scale_constant`` stands for every size of the exercise at once) shows
    at a step ``step_id`` (:func:`suggestion`'s test) and no two of them give the same numbers there, with their
    keys (at least two); ``None`` when there is none.  single-head-3x4 and single-head-asym-3x4 both have
    √d_model = d_k = 2, so neither tells dividing by √d_model from dividing by d_k; fully-masked-row-3x3 does."""
    wanted = [_BY_KEY[k] for k in comparable(keys)]
    if len(wanted) < 2:
        return None
    for ex in _bundled_order():
        if ex.id == exercise_id or not all((m.key, step_id) in _catches(ex) for m in wanted):
            continue
        sol, _ = _solved(ex)
        for step in [s.key for s in sol.steps if s.id == step_id]:
            with np.errstate(all="ignore"):
                values = [m.recompute(sol, *step) for m in wanted]
            if all(v is not None for v in values) and not any(
                    same_numbers(a, b) for i, a in enumerate(values) for b in values[i + 1:]):  # type: ignore[arg-type]
                return ex.id, tuple(m.key for m in wanted)
    return None


def changes(ex: Exercise, mistake: str, step_id: str) -> bool:
    """Whether catalogue mistake ``mistake``, a variant of the pipeline, can change a step ``step_id`` of ``ex`` (of
    some head): its knobs turn that step or one it is computed from.  False for a key that is no catalogue row, and
    for a mistake that is no variant (``transposed`` is one matrix written transposed, not every later one)."""
    m = _BY_KEY.get(mistake)
    return m is not None and m.variant is not None and any(k[0] == step_id and m.applies(ex, k) for k in keys(ex, backward=in_backward(step_id)))


def shows(ex: Exercise, mistakes: Sequence[str], step_id: str) -> bool:
    """Whether every mistake of ``mistakes`` (catalogue keys; others, such as ``single_entry``, are ignored) can
    change a step ``step_id`` of exercise ``ex`` and does not give exactly its right value there: an exercise
    on which a learner can be caught making them at that step.  What ``stats`` and ``practice`` recommend
    for a weak step the learner made those mistakes at (fix-rope, trial finding F17: a d_k = 2 RoPE exercise
    was recommended for a pairing mistake it cannot show).  False when ``ex`` cannot be solved with the
    backward pass a gradient step needs."""
    from ..base.errors import TutorError
    from ..steps import solve

    known = [_BY_KEY[k] for k in dict.fromkeys(mistakes) if k in _BY_KEY]
    if not known:
        return True
    backward = in_backward(step_id)
    try:
        sol = solve(ex, backward=backward)
    except TutorError:  # a backward pass refused (the pre-norm block, MLA): it cannot show a gradient's mistake
        return False
    hidden = {(f.key, f.step) for f in invisible(sol, [m.key for m in known])}
    for m in known:
        if not needs_met(sol, m.needs):
            return False
        at = [k for k in keys(ex, backward=backward) if k[0] == step_id and m.applies(ex, k)]
        if not at or all((m.key, k) in hidden for k in at):
            return False
    return True
