"""What a step kind is: the one record every engine, renderer, drill and check looks up.

A :class:`StepKind` holds everything that is true of one kind of step
(``scores``, ``weights`` ...) whatever the exercise: whether an exercise has
it, which earlier steps it is computed from, how each engine computes it
(the exact engine, the float walk and its slack, the batched layer's
reading and its rounding bound, the exact walk under a mistake), how one of
its entries is worked out, what the learner is given to compute it, its
names, its message keys and its formula's LaTeX.  The kinds are defined one
family to a module, each kind's functions side by side
(:mod:`tutor.steps.projection`, :mod:`tutor.steps.scores`,
:mod:`tutor.steps.softmax`, :mod:`tutor.steps.layer`, the backward pass's three), and put in order in
:mod:`tutor.steps.catalogue`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Literal

from ..base.messages import Msg, Text
from ..exact.numbers import frac_text
from ..exercise.record import Exercise
from .records import Key, Solution, Step
from .state import Build, ExactWalk, Replay
from .worked import Worked

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from ..exact.matrices import Matrix
    from ..numeric.layer import LayerRun

Scope = Literal["head", "layer"]


@dataclass(frozen=True)
class Input:
    """A matrix the learner is given for a step, as a prompt shows it: exact texts, floats, labels."""

    name: Text
    exact: tuple[tuple[str, ...], ...]
    value: tuple[tuple[float, ...], ...]
    row_labels: tuple[str, ...]
    col_labels: tuple[str, ...]

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.exact), len(self.exact[0]))


@dataclass(frozen=True)
class StepKind:
    """One kind of step.

    ``id``: the contract's step id; ``scope``: ``"head"`` (one per head) or
    ``"layer"``; ``op``: the operator of its shape annotation.

    What exists and depends on what:
      ``exists(ex)``: whether the exercise has this step;
      ``inputs(ex, head)``: the earlier steps it is computed from (``q``, ``k``,
      ``v`` have none: they come from the exercise).

    How it is computed (each engine's function, side by side in the kind's
    module, called by the walkers of :mod:`tutor.steps.catalogue` with the
    engine's state of :mod:`tutor.steps.state`; each reads the steps before
    it with ``state.inputs(kind, head)``, in ``inputs`` order):
      ``build(b, head)``: the exact step (:mod:`tutor.exact.engine` does the math);
      ``floats(r, head)``: the step in float64 under ``r.variant``, ``None``
      where the variant cannot reach it, :data:`~tutor.steps.state.PASS`
      where it leaves the step out; ``slack(r, head)``: how far it moves
      when its inputs move by ``r.slack`` (first order);
      ``production(run, ex, head)``: the step read off the batched layer's
      run (a :class:`tutor.numeric.layer.LayerRun`); ``rounding(r, head)``:
      how far float64 rounding may move that reading on this exercise;
      ``exact_walk(w, head)``: the float function's exact twin
      (:class:`~tutor.steps.state.ExactWalk`), ``None`` for a kind the
      exact walk does not follow (format v2's, the backward pass's);
      ``varies``: the :class:`~tutor.steps.variant.Variant` knobs ``floats``
      reads itself (a misconception that turns one of them can show up from
      this step on); the knobs that change an input as it is read (a rounded
      ``scaled`` or ``weights``) are added by :func:`tutor.steps.varies`.

    How it is taught:
      ``work(sol, step, i, j)``: entry ``(i, j)`` worked out with its products
      (a hint, a diagnosis), in the answer grammar;
      ``arithmetic(sol, step, places)``: the whole step worked out as on paper
      (:class:`~tutor.steps.worked.Worked` pieces in notation, decimals at
      ``places``: every dot product expanded, each softmax row's ``exp``
      values, their sum and each weight as ``e_j / Σ``); every renderer of a
      worked solution shows it (``()``: a step with no arithmetic, ``concat``);
      ``given(sol, step)``: the matrices the learner is given for it;
      ``why(step, ex)``: the sentences that say why it is there;
      ``names_head``: its result's name already says the head (``head_1``);
      ``latex``: its formula for handouts, a template with the fields
      ``{result}``, ``{head}``, ``{src}``, ``{d_k}``, ``{root}`` (``""``: the
      product of its operands); ``fixed_by_mask``: the value a mask forces on
      a blocked entry (``-inf`` or ``0``; exact by construction, never
      rounded); ``heatmap``: shown as shades too; ``axes_note``: a handout
      says which axis is which; ``checks``: the plausibility checks ``check``
      runs on it.  Messages: ``step.<id>.title``, ``step.<id>.why``,
      ``solution.no_step.<id>`` (a step an exercise may lack).
    """

    id: str
    scope: Scope
    op: str
    exists: Callable[[Exercise], bool]
    inputs: Callable[[Exercise, int | None], tuple[Key, ...]]
    build: Callable[[Build, int | None], Step]
    work: Callable[[Solution, Step, int, int], Text]
    given: Callable[[Solution, Step], tuple[Input, ...]]
    floats: Callable[[Replay, int | None], NDArray | object | None]
    slack: Callable[[Replay, int | None], NDArray]
    production: Callable[[LayerRun, Exercise, int | None], NDArray]
    rounding: Callable[[Replay, int | None], NDArray]
    exact_walk: Callable[[ExactWalk, int | None], Matrix | object | None] | None = None
    why: Callable[[Step, Exercise], list[Text]] = field(default=lambda step, ex: list[Text]([Msg(f"step.{step.id}.why")]))
    arithmetic: Callable[[Solution, Step, int], tuple[Worked, ...]] = field(default=lambda sol, step, places: ())
    varies: frozenset[str] = frozenset()
    latex: str = ""
    #: with RoPE (issue 23) a kind computed otherwise (d_Q, d_K: the rotated gradient turned back, a step of op
    #: ``rot``): its LaTeX template; its title and hint are then ``step.<id>.title.rope``, ``practice.hint.<id>.rope``
    latex_rope: str = ""
    fixed_by_mask: float | None = None
    heatmap: bool = False
    names_head: bool = False
    axes_note: bool = False
    checks: tuple[str, ...] = ()
    backward: bool = False  # a step of the backward pass (``explain --backward``; issue 13)
    late: bool = False  # a backward layer step that comes after the heads' (``d_x``), not before (``d_output``)
    advanced: bool = False  # a step of format v2 or v3 only (k_new, v_new, biased, x_norm, residual): recommended after the v1 steps
    #: with grouped K/V heads, one value per K/V head: k, v (k_new, v_new), and the backward pass's d_k, d_v and
    #: the K/V weights' and biases' gradients (the sum over the query heads that read it); keyed per query head,
    #: reported and named once per K/V head
    per_kv_head: bool = False
    #: a layer step computed before the heads' steps, which read it: the pre-norm block's ``x_norm`` (the
    #: projections read X_norm) and MLA's ``c_kv`` (the latent every head up-projects its K and V from); a layer
    #: step is otherwise computed after the heads.  The one notion of an early step: :func:`keys`, the outline and
    #: :data:`tutor.authoring.steplist.EARLY` all read it
    early: bool = False
    #: the catalogue key of the step's title when an exercise computes it from other matrices (the scores of
    #: ``Q_rot·K_rotᵀ`` with RoPE); ``None``: always ``step.<id>.title``.  Read through :meth:`title_of`
    title_key: Callable[[Exercise], str] | None = None

    @property
    def title(self) -> Text:
        """``"Scores Q·Kᵀ"``: the step's title in the message catalogue."""
        return Msg(f"step.{self.id}.title")

    def suffix(self, step: Step) -> str:
        """``".rope"`` for a step of this kind computed as RoPE's turned-back gradient (see ``latex_rope``), else ``""``."""
        return ".rope" if self.latex_rope and step.op == "rot" else ""

    def title_of(self, step: Step, ex: Exercise | None = None) -> Text:
        """The title of ``step`` (one of this kind) in ``ex``: what it multiplies there when the kind says
        (``title_key``: ``"Scores Q_rot·K_rotᵀ"`` with RoPE), else ``step.<id>.title`` or its ``.rope`` form
        (RoPE's turned-back gradient)."""
        if ex is not None and self.title_key is not None:
            return Msg(self.title_key(ex))
        return Msg(f"step.{self.id}.title{self.suffix(step)}")


def always(ex: Exercise) -> bool:
    """``exists`` of a step every exercise has."""
    return True


def dims(prefix: str, n: int) -> tuple[str, ...]:
    """Column labels ``d1 … dn`` (or another prefix)."""
    return tuple(f"{prefix}{i + 1}" for i in range(n))


def given_matrix(name: str, m: Sequence[Sequence[Fraction]], rows: Sequence[str], cols: Sequence[str]) -> Input:
    """An exercise matrix (exact rationals) as the learner is given it."""
    return Input(name, tuple(tuple(frac_text(x) for x in row) for row in m),
                 tuple(tuple(float(x) for x in row) for row in m), tuple(rows), tuple(cols))


def given_step(step: Step) -> Input:
    """An earlier step's right value as the learner is given it."""
    return Input(step.name, tuple(tuple(str(e) for e in row) for row in step.exact),
                 step.value, step.row_labels, step.col_labels)
