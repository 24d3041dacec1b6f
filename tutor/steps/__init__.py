"""The step catalogue: one ``StepKind`` per kind of step (``q`` … ``output``,
``d_output`` … ``d_x``) says everything true of it -- whether an exercise
has it, what it is computed from, how each engine computes it, how it is
worked out, taught and checked -- and every engine, renderer, drill and
check asks here instead of testing step ids.  A kind's functions sit side by
side in its family's module: the exact build, the float walk and its slack,
the batched layer's reading and its rounding bound, the exact walk under a
mistake.

One :class:`StepKind` per kind of step (``q`` … ``output``, ``d_output`` …
``d_x``) says everything that is true of it -- whether an exercise has it,
what it is computed from, how each engine computes it, how it is worked
out, taught and checked -- and every engine, renderer, drill and check looks
it up here instead of testing step ids.  A kind's functions sit side by
side in its family's module: the exact build, the float walk and its slack,
the batched layer's reading and its rounding bound, the exact walk under a
mistake.  ``docs/architecture.md`` says how to add a step.

* :mod:`.records` -- :class:`Step`, :class:`Solution`, :class:`Operand` (data);
* :mod:`.kind` -- :class:`StepKind`, and the helpers kinds are written with;
* :mod:`.variant` -- :class:`Variant`, the knobs a misconception turns;
* :mod:`.state` -- what each engine carries through a walk (:class:`Build`,
  :class:`Replay`, :class:`ExactWalk`); :mod:`.rounding` -- float64 error bounds;
* the kinds: :mod:`.projection` (``q``, ``k_new``, ``v_new``, ``k``, ``v``),
  :mod:`.scores` (``scores``, ``scaled``, ``biased``, ``masked``),
  :mod:`.softmax` (``weights``, ``head_output``), :mod:`.layer` (``concat``,
  ``output``); the backward pass's :mod:`.backward_layer`,
  :mod:`.backward_head`, :mod:`.backward_projection` (what they share:
  :mod:`.grad`);
* :mod:`.catalogue` -- the kinds in order, the step graph, and the walks
  (:func:`solve` exact, :func:`replay` in floats, :class:`Walk` exactly under a variant);
* :mod:`.worked` -- the pieces of an entry worked out.
"""

from .catalogue import (
    BACKWARD_IDS,
    CATALOGUE,
    EXACT_KNOBS,
    HEAD_STEPS,
    KINDS,
    LAYER_STEPS,
    STEP_IDS,
    NoExactForm,
    Walk,
    blocked_cells,
    downstream,
    entry_work,
    exact_replay,
    exists,
    has_backward,
    inputs,
    keys,
    kind,
    replay,
    rounding_bounds,
    solve,
    supports,
    upstream,
    varies,
    worked_entry,
)
from .kind import Input, StepKind
from .records import Key, Operand, Solution, Step
from .scores import empty_rows, torch_empty_row
from .state import PASS, Build, ExactWalk, Replay
from .variant import RIGHT, Variant
from .worked import HAND_SIZED, Worked, entry_name, hand_sized

__all__ = [
    "blocked_cells",
    "BACKWARD_IDS",
    "CATALOGUE",
    "EXACT_KNOBS",
    "PASS",
    "RIGHT",
    "Build",
    "ExactWalk",
    "NoExactForm",
    "Replay",
    "Variant",
    "Walk",
    "exact_replay",
    "supports",
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
    "has_backward",
    "hand_sized",
    "inputs",
    "keys",
    "kind",
    "replay",
    "rounding_bounds",
    "solve",
    "torch_empty_row",
    "upstream",
    "varies",
    "worked_entry",
]
