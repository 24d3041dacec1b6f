"""Step and Solution records shared by the engines, the renderers and the grader.

A :class:`Step` is one computed stage of the attention computation: its
catalogue id (``q``, ``scores``, ``weights`` ...; :mod:`tutor.steps.catalogue`
says what each one is), the head it belongs to (``None`` for a layer step),
its exact matrix, its formula and the operands that make its shape
annotation.  Records only: no computing, no printing.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from ..base.messages import Msg, Text
from ..exact.numbers import Exact
from ..exercise.record import Exercise

#: A step's place in an exercise: ``(id, head)``, ``head`` ``None`` for a layer step.
Key = tuple[str, "int | None"]


@dataclass(frozen=True)
class Operand:
    """A named matrix in a shape annotation: ``W_Q [4×2]``; ``shape`` may be 1-D (a bias)."""

    name: str
    shape: tuple[int, ...]

    def __str__(self) -> str:
        if not self.shape:
            return self.name
        return f"{self.name} [{'×'.join(map(str, self.shape))}]"


@dataclass(frozen=True)
class Step:
    """One step: ``exact`` is ``[rows][cols]`` of :class:`Exact`; ``value`` its floats.

    ``name`` is what the step's result is called (``Q``, ``scores``,
    ``head_1``); ``op`` the operator between operands in the annotation
    (``·``, ``/``, ``+``, ``softmax``, ``concat``).  ``formula`` and
    :meth:`annotation` use Unicode notation (``·``, ``ᵀ``, ``√``, ``×``,
    ``→``); renderers transliterate it for ASCII-only streams.
    """

    id: str
    head: int | None
    name: str
    formula: Text
    operands: tuple[Operand, ...]
    op: str
    exact: tuple[tuple[Exact, ...], ...]
    row_labels: tuple[str, ...]
    col_labels: tuple[str, ...]
    kv_head: int | None = None  # K, V of grouped K/V heads (format v2): the K/V head this step is (0-based)
    shared: tuple[int, ...] = ()  # ... and the query heads that read it (0-based)

    @property
    def key(self) -> Key:
        return (self.id, self.head)

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.exact), len(self.exact[0]) if self.exact else 0)

    @property
    def result(self) -> Operand:
        return Operand(self.name, self.shape)

    @cached_property
    def value(self) -> tuple[tuple[float, ...], ...]:
        """Float64 values of ``exact`` (``-inf`` for a masked score)."""
        return tuple(tuple(e.value() for e in row) for row in self.exact)

    def annotation(self) -> Text:
        """``X [3×4] · W_Q [4×2] → Q [3×2]``; ``[K_cache [3×2]; K_new [1×2]] → K [4×2]`` (a cache append);
        grouped K/V heads add the sharing: ``… → K [3×2], K/V head 1, shared by query heads 1, 2``."""
        parts = [str(o) for o in self.operands]
        if self.op == "softmax":
            left = f"softmax({parts[0]})"
        elif self.op == "concat":
            left = "[" + ", ".join(parts) + "]"
        elif self.op == "append":
            left = "[" + "; ".join(parts) + "]"
        else:
            left = parts[0]
            for o in parts[1:]:
                sep = "+" if o.startswith("b_") else self.op
                left += f" {sep} {o}"
        if self.kv_head is not None:
            key = "annotation.with_summed" if self.id.startswith("d_") else "annotation.with_shared"  # a K/V gradient adds up
            return Msg(key, annotation=f"{left} → {self.result}", kv=self.kv_head + 1,
                     heads=Msg.joined("list.sep", [str(h + 1) for h in self.shared]))
        return f"{left} → {self.result}"


@dataclass(frozen=True)
class Solution:
    """Every step of an exercise, in the catalogue's order (head 0's steps first, then the layer's)."""

    exercise: Exercise
    steps: tuple[Step, ...]

    def step(self, id: str, head: int | None = None) -> Step:
        """The step ``id`` of ``head`` (``None`` for layer steps).  Raises ``KeyError``."""
        for s in self.steps:
            if s.id == id and s.head == head:
                return s
        raise KeyError((id, head))

    def get(self, key: Key) -> Step | None:
        """The step at ``key``, or ``None`` when the exercise has no such step."""
        try:
            return self.step(*key)
        except KeyError:
            return None

    def for_head(self, head: int) -> tuple[Step, ...]:
        return tuple(s for s in self.steps if s.head == head)

    @property
    def layer_steps(self) -> tuple[Step, ...]:
        return tuple(s for s in self.steps if s.head is None)

    @property
    def final(self) -> Step:
        """The layer's result: ``output``, else ``concat``, else head 0's output."""
        return self.steps[-1]
