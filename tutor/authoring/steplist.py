"""The forward steps an exercise has, by id and head, without the step catalogue: what ``attn-tutor
list`` counts (``pending 3/7``).

``list`` has to start fast (issue 19, item 7: it imports neither :mod:`tutor.steps` nor sympy
nor numpy), yet each exercise's step count is the catalogue's to decide
(:func:`tutor.steps.keys`).  This table repeats, for the forward kinds only, the three things the
count reads -- the id, the scope and ``exists`` -- in the
catalogue's order; ``tests/test_catalogue.py`` holds it equal to the catalogue on every bundled
exercise and on generated ones with every feature, and fails naming this file when a forward
kind is added, removed or reordered without it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..exercise.record import Exercise

def _always(ex: Exercise) -> bool:
    return True


#: ``(id, scope, exists)`` of each forward kind, in the catalogue's order.
FORWARD_STEPS: tuple[tuple[str, str, Callable[[Exercise], bool]], ...] = (
    ("x_norm", "layer", lambda ex: ex.has_norm),  # a layer step before the heads (EARLY)
    ("c_kv", "layer", lambda ex: ex.mla is not None),  # MLA's latent: a layer step before the heads (EARLY)
    ("q", "head", _always),
    ("k_new", "head", lambda ex: ex.has_cache),
    ("v_new", "head", lambda ex: ex.has_cache),
    ("k", "head", _always),
    ("v", "head", _always),
    ("q_rot", "head", lambda ex: ex.rope is not None),
    ("k_rot", "head", lambda ex: ex.rope is not None),
    ("scores", "head", _always),
    ("q_absorbed", "head", lambda ex: ex.mla is not None),
    ("scores_absorbed", "head", lambda ex: ex.mla is not None),
    ("scaled", "head", _always),
    ("biased", "head", lambda ex: ex.has_bias),
    ("masked", "head", lambda ex: ex.has_mask),
    ("weights", "head", _always),
    ("head_output", "head", _always),
    ("concat", "layer", lambda ex: ex.num_heads > 1),
    ("output", "layer", lambda ex: ex.w_o is not None),
    ("residual", "layer", lambda ex: ex.residual),
    ("out_norm", "layer", lambda ex: ex.post_norm),  # post-norm: X + output normalized, last (issue 23)
)


#: The layer steps that come before the heads' (the catalogue's ``StepKind.early``): the pre-norm block's norm
#: and MLA's latent, which the heads read.
EARLY = frozenset({"x_norm", "c_kv"})


def forward_keys(ex: Exercise) -> list[tuple[str, int | None]]:
    """Every forward step ``ex`` has, as :func:`tutor.steps.keys` lists them (each head's steps, head 0
    first, then the layer's; the :data:`EARLY` layer steps before the heads')."""
    live = [(id, scope) for id, scope, exists in FORWARD_STEPS if exists(ex)]
    per_head: list[tuple[str, int | None]] = [(id, h) for h in range(ex.num_heads) for id, scope in live if scope == "head"]
    early: list[tuple[str, int | None]] = [(id, None) for id, scope in live if scope == "layer" and id in EARLY]
    return early + per_head + [(id, None) for id, scope in live if scope == "layer" and id not in EARLY]
