"""The step: the unit of the design.

One :class:`StepKind` per kind of step (``q`` … ``output``) says everything
that is true of it -- whether an exercise has it, what it is computed from,
how each engine computes it, how it is worked out, taught and checked -- and
every engine, renderer, drill and check looks it up here instead of testing
step ids.  ``docs/architecture.md`` says how to add a step.

* :mod:`.records` -- :class:`Step`, :class:`Solution`, :class:`Operand` (data);
* :mod:`.kind` -- :class:`StepKind`, and the helpers kinds are written with;
* :mod:`.projection`, :mod:`.attention`, :mod:`.layer` -- the kinds;
* :mod:`.catalogue` -- the kinds in order, the step graph, and the walks
  (:func:`solve` exact, :func:`replay` in floats).
"""

from .attention import empty_rows, torch_empty_row
from .catalogue import (
    CATALOGUE,
    HEAD_STEPS,
    KINDS,
    LAYER_STEPS,
    STEP_IDS,
    downstream,
    entry_work,
    exists,
    inputs,
    keys,
    kind,
    replay,
    solve,
    upstream,
    worked_entry,
)
from .kind import Input, StepKind
from .records import Key, Operand, Solution, Step
from .worked import HAND_SIZED, Worked, entry_name, hand_sized

__all__ = [
    "CATALOGUE",
    "HAND_SIZED",
    "HEAD_STEPS",
    "KINDS",
    "LAYER_STEPS",
    "STEP_IDS",
    "Input",
    "Key",
    "Operand",
    "Solution",
    "Step",
    "StepKind",
    "Worked",
    "downstream",
    "empty_rows",
    "entry_name",
    "entry_work",
    "exists",
    "hand_sized",
    "inputs",
    "keys",
    "kind",
    "replay",
    "solve",
    "torch_empty_row",
    "upstream",
    "worked_entry",
]
