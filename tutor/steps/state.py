"""What each engine carries while the catalogue walks an exercise's steps.

Four engines compute every step kind, each with its own function on the kind
(:class:`~tutor.steps.StepKind`), called in the catalogue's order
(:func:`tutor.steps.keys`) with one of these states:

* :class:`Build` -- the exact engine (:func:`tutor.steps.solve`): exact
  entries, and what a later step needs of an earlier one (a
  :class:`~tutor.exact.engine.QMat`, the softmax rows);
* :class:`Replay` -- the float walk (:func:`tutor.steps.replay`): float64
  values under a misconception's :class:`~tutor.steps.variant.Variant`,
  optionally over an author's own values with the slack their rounding
  allows (``check``); with :attr:`Replay.slack` it also carries the
  rounding bounds :func:`tutor.production.verify` allows the batched layer;
* :class:`ExactWalk` -- the float walk's exact twin (:class:`tutor.steps.Walk`),
  whose entries are :mod:`tutor.exact.matrices` values, so that "this mistake
  gives exactly the right matrix" is decided exactly.

A kind reads the steps it is computed from with ``state.inputs(kind, head)``:
the steps ``kind.inputs(ex, head)`` names, in that order, so that the one
place that decides what a step reads is its kind.  A variant may leave a
step out in a way that lets the next one go on (a mask applied after the
softmax leaves ``masked`` out: the softmax then reads what ``masked`` would
have read): its function returns :data:`PASS`, the walk records it, and a
read of that step reads its first input instead.  A step a variant cannot
reach (shapes that no longer chain) is ``None``, and so is every step read
from it.  Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Final, Protocol

from ..exact import matrices as em
from .records import Key, Step
from .variant import RIGHT, Variant

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from ..exercise.record import BoolMatrix, Exercise
else:
    from ..base.lazy import numpy as np


if TYPE_CHECKING:
    Array = NDArray[np.float64]


class StepKind(Protocol):
    """What a state needs of a step kind (:class:`tutor.steps.StepKind`): the steps it is computed from."""

    @property
    def inputs(self) -> Callable[[Exercise, int | None], tuple[Key, ...]]: ...


class _Pass:
    """The value of a step a variant leaves out, whose first input stands for it (:data:`PASS`)."""

    def __repr__(self) -> str:
        return "PASS"


#: Returned by a float or exact-walk function for a step the variant leaves out (see the module docstring).
PASS: Final = _Pass()


def _follow(passed: dict[Key, Key], key: Key) -> Key:
    """``key``, or the step that stands for it when the variant left it out."""
    while key in passed:
        key = passed[key]
    return key


# --- the exact engine ----------------------------------------------------------------------------------


class Build:
    """The exact engine's state while :func:`tutor.steps.solve` walks an exercise.

    ``data[key]`` keeps what a later step needs of an earlier one beyond its
    matrix (a :class:`tutor.exact.engine.QMat`, the softmax rows ...); ``steps[key]``
    the finished :class:`Step`.
    """

    def __init__(self, ex: Exercise):
        self.ex = ex
        self.allowed: BoolMatrix | None = ex.allowed()
        self.data: dict[Key, object] = {}
        self.steps: dict[Key, Step] = {}

    def inputs(self, kind: StepKind, head: int | None) -> list[Any]:
        """What the exact engine kept of each step ``kind`` is computed from, in ``kind.inputs`` order."""
        return [self.data[key] for key in kind.inputs(self.ex, head)]


# --- the float walk ----------------------------------------------------------------------------------------

#: When a step is read as the input of the next one, the knob that rounds it.
_ROUNDED = {"scaled": "round_scaled", "weights": "round_weights"}
#: The knobs that change a step as it is read by the next one, by its id: a step that reads ``scaled``
#: varies by ``round_scaled`` whatever its own function does (:func:`tutor.steps.varies`).  ``truncate``
#: only says how those round (cut, not rounded): it changes nothing without one of them.
READ_KNOBS: dict[str, frozenset[str]] = {id: frozenset({knob}) for id, knob in _ROUNDED.items()}


#: The float forms of an exercise's matrices and vectors already converted, by the identity of the (immutable)
#: tuple: the float walk reads the same weights once per head and per misconception (74 walks for ``explain``'s
#: invisible mistakes), and ``float(Fraction)`` is slow.  The tuple is held beside its array, so its ``id``
#: cannot be reused while it is here.
_FLOAT_FORMS: dict[int, tuple[object, Array]] = {}
_FLOAT_FORMS_KEPT = 256


def _float_form(m: Any, convert: Callable[[Any], Array]) -> Array:
    if not isinstance(m, tuple):  # a list may change: converted each time
        return convert(m)
    hit = _FLOAT_FORMS.get(id(m))
    if hit is not None and hit[0] is m:
        return hit[1]
    a = convert(m)
    a.setflags(write=False)  # shared: a caller that changed it would change every later walk
    if len(_FLOAT_FORMS) >= _FLOAT_FORMS_KEPT:
        _FLOAT_FORMS.clear()
    _FLOAT_FORMS[id(m)] = (m, a)
    return a


def floats(m: Sequence[Sequence[Fraction]]) -> Array:
    """Exact rationals ``[r][c]`` as float64 ``[r, c]``, read-only (converted once per tuple)."""
    return _float_form(m, lambda m: np.array([[float(x) for x in row] for row in m], dtype=np.float64))


def vector(v: Sequence[Fraction] | None) -> Array | None:
    """Exact rationals ``[c]`` as float64 ``[c]``, read-only (``None`` stays ``None``)."""
    return None if v is None else _float_form(v, lambda v: np.array([float(x) for x in v], dtype=np.float64))


def mul_slack(A: Array, dA: Array, B: Array, dB: Array) -> Array:
    """How far ``A @ B`` moves when ``A`` and ``B`` move by up to ``dA`` and ``dB``: ``[n, m]·[m, p] -> [n, p]``
    (first order, ``|A|·δB + δA·|B| + δA·δB``)."""
    return np.abs(A) @ dB + dA @ np.abs(B) + dA @ dB


#: How close a float must be to a decimal to be read as on it when cut, in units of the last decimal kept
#: (relative to the value when it is larger than one such unit): far above float64's round-off in a step
#: (a few units in the 16th significant digit, more after cancellation), far below one unit.
CUT_TOLERANCE = 1e-9


def _cut(value: Array, places: int) -> Array:
    """``value`` with its decimals after the ``places``-th cut off, toward 0 (``np.trunc``), a value within
    round-off of a decimal read as on it: ``1`` computed as ``0.9999999999999998`` cuts to ``1.00``, as a
    learner who has the exact ``1`` cuts it, not to ``0.99`` (``[r, c]`` float64 -> ``[r, c]``)."""
    scaled = value * 10.0**places
    near = np.rint(scaled)
    on = np.abs(scaled - near) <= CUT_TOLERANCE * np.maximum(1.0, np.abs(scaled))
    return np.where(on, near, np.trunc(scaled)) / 10.0**places


@dataclass
class Replay:
    """The state of one float walk: the exercise, the variant, and every step computed so far.

    ``values[(id, head)]`` is a step's ``[rows, cols]`` float64 value as the
    next steps read it (for ``check``: the author's where given); ``passed``
    the steps the variant left out, each with the step that stands for it;
    ``slack``, when not ``None``, the half-widths the values may be off by;
    ``computed``, when carrying an author's values, each step as computed
    from the carried inputs and its slack.  ``right`` walks the exercise
    again with no mistake (a variant that mixes in the right values of
    other heads: the heads' weights averaged).
    """

    ex: Exercise
    variant: Variant = RIGHT
    values: dict[Key, Array] = field(default_factory=dict)
    slack: dict[Key, Array] | None = None
    computed: dict[Key, tuple[Array, Array]] = field(default_factory=dict)
    passed: dict[Key, Key] = field(default_factory=dict)
    right: Callable[[], Replay] | None = None

    def __post_init__(self) -> None:
        self.x = floats(self.ex.x)  # [L, d_model]
        self.kv = floats(self.ex.kv)  # [L_k, d_kv]
        allowed = self.ex.allowed()
        self.allowed = None if allowed is None else np.array(allowed, dtype=bool)  # [L, L_k], True = may attend

    def input(self, id: str, head: int | None) -> Array | None:
        """Step ``(id, head)`` as the next step reads it (rounded where the variant says so), or ``None``."""
        key = _follow(self.passed, (id, head))
        value = self.values.get(key)
        knob = _ROUNDED.get(key[0])
        if value is None or knob is None or getattr(self.variant, knob) is None:
            return value
        places = getattr(self.variant, knob)
        if self.variant.truncate:  # the decimals cut off: 0.4458 -> 0.44
            with np.errstate(invalid="ignore"):
                return np.where(np.isinf(value), value, _cut(value, places))
        return np.round(value, places)

    def inputs(self, kind: StepKind, head: int | None) -> list[Array | None]:
        """The steps ``kind`` is computed from, as it reads them (:meth:`input`), in ``kind.inputs`` order."""
        return [self.input(*key) for key in kind.inputs(self.ex, head)]

    def value(self, key: Key) -> Array:
        """Step ``key`` as computed (never rounded; the step standing for it when the variant left it out)."""
        return self.values[_follow(self.passed, key)]

    def delta(self, id: str, head: int | None) -> Array:
        """The slack of step ``(id, head)``."""
        assert self.slack is not None
        return self.slack[_follow(self.passed, (id, head))]

    def bias(self, name: str, b: Sequence[Fraction] | None) -> Array | float:
        """A bias as floats, or 0 when there is none or the variant drops it."""
        return 0.0 if b is None or name in self.variant.drop else vector(b)  # type: ignore[return-value]


# --- the exact walk -------------------------------------------------------------------------------------


class ExactWalk:
    """The state of one exact walk under a variant (the float walk's twin, :class:`Replay`).

    ``values`` holds each step's :data:`tutor.exact.matrices.Matrix`;
    ``qmats`` Q, K, V as the exact engine's integer matrices (never rounded):
    the scores are computed on them.
    """

    def __init__(self, ex: Exercise, variant: Variant):
        self.ex, self.variant = ex, variant
        self.values: dict[Key, em.Matrix] = {}
        self.passed: dict[Key, Key] = {}
        self.qmats: dict[Key, Any] = {}  # Q, K, V as tutor.exact.engine.QMat
        allowed = ex.allowed()
        self.allowed = None if allowed is None else [list(r) for r in allowed]  # [L, L_k], True = may attend

    def input(self, id: str, head: int | None) -> em.Matrix | None:
        """Step ``(id, head)`` as the next step reads it (rounded where the variant says so)."""
        key = _follow(self.passed, (id, head))
        value = self.values.get(key)
        places = {"scaled": self.variant.round_scaled, "weights": self.variant.round_weights}.get(key[0])
        if value is None or places is None:
            return value
        if self.variant.truncate:  # the decimals cut off: 0.4458 -> 0.44
            return [[em.truncated(x, places) for x in row] for row in value]
        return [[em.rounded(x, places) for x in row] for row in value]

    def inputs(self, kind: StepKind, head: int | None) -> list[em.Matrix | None]:
        """The steps ``kind`` is computed from (:meth:`input`), in ``kind.inputs`` order."""
        return [self.input(*key) for key in kind.inputs(self.ex, head)]

    def bias(self, name: str, b: tuple[Fraction, ...] | None) -> tuple[Fraction, ...] | None:
        """A bias, or ``None`` when there is none or the variant drops it."""
        return None if b is None or name in self.variant.drop else b
