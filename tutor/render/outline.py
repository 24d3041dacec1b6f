"""What a worked solution shows, and in what order: the outline every format of ``explain`` renders.

:func:`outline` reads a :class:`~tutor.steps.Solution` once and returns an
:class:`Outline`: the header (title, sizes, the sentences on the mask, the
padding and format v2's parts, the input matrices), the parts (each head,
the layer, the backward pass), each with its matrices and its steps (the
formula is the step's; the outline adds the title, the sentences on why it
is there, the arithmetic, the notes on the mistakes the exercise cannot
catch), the dimension flow, and the production view.  The terminal and HTML
(:mod:`.rich`), Markdown (:mod:`.markdown`) and JSON (:mod:`.json`) render
it, each in its own notation, each leaving out what its format does not
show (JSON has no parts).  Pure: no printing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..base.messages import Text, join_sentences, plural, t
from ..exact.numbers import frac_text
from ..exercise.record import Exercise, Matrix, alibi_slope, unrolled, window_slots
from ..steps import KINDS, Solution, Step, Worked, hand_sized
from .text import reflow

if TYPE_CHECKING:
    from ..numeric.trace import TraceStep
    from ..production.masks import TorchMask


@dataclass(frozen=True)
class Named:
    """An input matrix as a part shows it: its name, entries and row labels (``r1 …`` for a weight,
    one empty label for a bias ``[1, n]``)."""

    name: str
    matrix: Matrix
    rows: tuple[str, ...]


@dataclass(frozen=True)
class Header:
    """The opening of a worked solution: every text is a sentence to show as it is (no markup).

    ``mask``: the sentence on a causal mask or a mask matrix (``None``
    without either); ``mask_matrix`` the matrix ``[L, L_k]`` (True = may
    attend) when there is one; ``mask_notes`` what production code makes of a
    causal mask here (top-left alignment, cross-attention); ``v2`` the
    sentences on format v2's parts; ``inputs`` X (and X_kv).
    """

    title: str
    id: str
    source: str | None
    description: str | None  # reflowed: the lines of each paragraph joined
    sizes: str
    mask: str | None
    mask_matrix: tuple[tuple[bool, ...], ...] | None
    mask_notes: tuple[str, ...]
    padding: str | None
    v2: tuple[str, ...]
    inputs: tuple[Named, ...]


@dataclass(frozen=True)
class StepItem:
    """One step as it is shown.

    ``number``: its place in the list it is in, from 1 (the parts count
    through the whole solution); ``why`` the sentences on why it is there;
    ``worked`` its arithmetic (none in the brief view, on a worksheet, or
    beyond a hand-sized exercise); ``notes`` the sentences on the core
    mistakes this exercise cannot catch at it (none on a worksheet);
    ``keys`` the same as misconception keys (asked for by ``keys=True``);
    ``axes`` the sentence naming the rows and columns of a score-like matrix;
    ``heatmap`` whether its weights are also shown as shades.
    """

    number: int
    step: Step
    title: str
    why: tuple[str, ...]
    worked: tuple[Worked, ...] = ()
    notes: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()
    axes: str | None = None
    heatmap: bool = False


@dataclass(frozen=True)
class Rule:
    """A heading inside a part: where the backward pass moves on to another head (or K/V head)."""

    title: str


@dataclass(frozen=True)
class Part:
    """A part of the solution under its heading: a head, the layer, the backward pass; the matrices
    it introduces (the head's weights, W_O), then its steps."""

    title: str
    inputs: tuple[Named, ...]
    entries: tuple[StepItem | Rule, ...]


@dataclass(frozen=True)
class Flow:
    """Every step's shape annotation in order: ``steps`` of the head shown (the one asked, else the
    first), a line saying each of ``heads`` heads does the same (when more than one), the layer's, and
    the gradients of the head shown and of the layer.  ``first``: the first head's steps, which the
    Markdown handout lists under ``--head`` as well (as it always has)."""

    steps: tuple[Step, ...]
    first: tuple[Step, ...]
    heads: int
    layer: tuple[Step, ...]
    backward: tuple[Step, ...]


@dataclass(frozen=True)
class MaskItem:
    """One mask of the exercise as PyTorch takes it, and what it means there."""

    mask: TorchMask
    meaning: str


@dataclass(frozen=True)
class Outline:
    """A worked solution as it is shown: ``header``, ``parts``, ``flow``; the production view
    (``production``: the batched layer as shapes, ``production_notes`` on its configuration,
    ``masks``); and ``steps``, every step shown once in the solution's order (a K/V step shared by a
    group once, under its first query head), for a format that lists them flat.  ``blank``: a
    worksheet (the answers are left to the learner)."""

    exercise: Exercise
    header: Header
    parts: tuple[Part, ...]
    flow: Flow
    steps: tuple[StepItem, ...]
    production: tuple[TraceStep, ...]
    production_notes: tuple[Text, ...]
    masks: tuple[MaskItem, ...]
    blank: bool = False


def _listed(words: Iterable[str]) -> str:
    """Words listed in a sentence, by the catalogue's ``list.sep``: ``t1, t2, t3``, in Chinese ``t1、t2、t3``."""
    return t("list.sep").join(words)


def outline(sol: Solution, *, head: int | None = None, precision: int = 4, brief: bool = False, blank: bool = False,
            keys: bool = False) -> Outline:
    """The outline of ``sol``: every head, or only ``head`` (0-based; the layer's steps are kept).

    ``precision``: decimals in the arithmetic; ``brief``: no arithmetic;
    ``blank``: a worksheet (no arithmetic, no notes, no heatmap); ``keys``:
    the mistakes each step cannot catch as misconception keys (for a
    program: ``--format json``), not as sentences.  Raises
    :class:`~tutor.base.errors.ShapeError` when the production view cannot
    be built (as :func:`tutor.production.view.production_view`).
    """
    # numpy and the misconception catalogue are loaded only when a solution is shown
    from ..mistakes.invisible import by_step, notes
    from ..production.masks import pytorch_masks
    from ..production.view import production_view

    ex = sol.exercise
    forward = Solution(ex, tuple(s for s in sol.steps if not KINDS[s.id].backward))
    back = tuple(s for s in sol.steps if KINDS[s.id].backward and (head is None or s.head in (None, head))
                 and (head is not None or s.kv_head is None or s.head == s.shared[0]))  # a group's K/V gradient once
    said = {} if blank or keys else notes(forward)
    if not (blank or keys):  # a decode step given its past inputs: the full forward's last rows, beside its own
        said = _full_forward(forward, said, precision)
    hidden = by_step(sol) if keys else {}
    worked = not (brief or blank) and hand_sized(ex)

    made: dict[int, StepItem] = {}  # a step in a part and in the flat list is worked out once

    def item(number: int, step: Step) -> StepItem:
        done = made.get(id(step))
        if done is None:
            kind = KINDS[step.id]
            axes = t("handout.scores_axes", rows=_listed(step.row_labels), cols=_listed(step.col_labels))
            done = made[id(step)] = StepItem(
                number, step, str(kind.title_of(step, ex)), tuple(str(w) for w in kind.why(step, ex)),
                kind.arithmetic(sol if kind.backward else forward, step, precision) if worked else (),
                tuple(str(n) for n in said.get(step.key, ())), hidden.get(step.key, ()), axes if kind.axes_note else None,
                kind.heatmap and not blank)
        return done if done.number == number else replace(done, number=number)

    parts: list[Part] = []
    number = 0
    # the early layer steps (StepKind.early): the pre-norm block's x_norm, MLA's latent c_kv; before the heads, which read them
    early = tuple(s for s in forward.layer_steps if KINDS[s.id].early)
    late = tuple(s for s in forward.layer_steps if not KINDS[s.id].early)
    if early:
        title, given = (t("explain.latent"), _latent_weights(ex)) if ex.mla is not None else (t("explain.block"), ())
        parts.append(Part(title, given, tuple(item(number + n, s) for n, s in enumerate(early, 1))))
        number += len(early)
    for h in range(ex.num_heads) if head is None else [head]:
        steps = forward.for_head(h)
        parts.append(Part(t("explain.head", head=h + 1), _weights(ex, h),  # heads counted from 1 where a learner reads them
                          tuple(item(number + n, s) for n, s in enumerate(steps, 1))))
        number += len(steps)
    if late:
        parts.append(Part(t("explain.layer"), _output_weights(ex),
                          tuple(item(number + n, s) for n, s in enumerate(late, 1))))
        number += len(late)
    if back:  # the gradients in the order they are computed, output to input
        parts.append(Part(t("explain.backward"), (), _backward(ex, back, number, item)))
    trace, production_notes = production_view(ex)
    shown = [s for s in sol.steps if s.kv_head is None or s.head == s.shared[0]]  # a group's K/V once
    shown = [s for s in shown if head is None or s.head in (head, None) or s.kv_head is not None and head in s.shared]
    return Outline(
        exercise=ex, header=_header(ex, production_notes), parts=tuple(parts),
        flow=Flow(early + forward.for_head(head or 0), early + forward.for_head(0), ex.num_heads, late,
                  tuple(s for s in back if s.head in (None, head or 0))),
        steps=tuple(item(n, s) for n, s in enumerate(shown, 1)), production=trace,
        production_notes=production_notes,
        masks=tuple(MaskItem(m, t(f"explain.production.mask.{m.kind}")) for m in pytorch_masks(ex)), blank=blank)


def _full_forward(forward: Solution, said: dict, precision: int) -> dict:
    """``said`` with a note on the decode step's last forward step: the full forward over every token
    (:func:`~tutor.exercise.record.unrolled`), solved by the same engine, and its last rows -- the same
    as the decode step's when the cache holds the earlier tokens' projections."""
    from ..base.decimals import fixed
    from ..steps import solve

    ex = forward.exercise
    full = unrolled(ex)
    if full is None:
        return said
    last = forward.final
    rows = solve(full).step(last.id, last.head).exact[ex.L_past:]  # [L, d]: the new tokens' rows
    if [[str(e) for e in row] for row in rows] == [[str(e) for e in row] for row in last.exact]:
        key = "explain.v2.full_forward"  # the same exact forms
    elif all(math.isclose(e.value(), d, rel_tol=1e-12, abs_tol=1e-300)
             for row, mine in zip(rows, last.value, strict=True) for e, d in zip(row, mine, strict=True)):
        key = "explain.v2.full_forward.float"  # other forms of (very likely) the same numbers: not claimed exact
    else:
        key = "explain.v2.full_forward.differs"
    shown = "; ".join("[" + ", ".join(fixed(e.value(), precision) for e in row) + "]" for row in rows)
    note = plural(key, ex.L, n=ex.L_k, labels=_listed(ex.key_labels), step=last.name, rows=shown)
    if ex.mask_kind == "sliding_window":  # issue 23: the full forward is windowed too, not merely causal
        note = join_sentences([note, t("explain.window.full_forward", W=ex.window)])
    return {**said, last.key: (*said.get(last.key, ()), note)}


def _backward(ex: Exercise, back: tuple[Step, ...], number: int,
              item: Callable[[int, Step], StepItem]) -> tuple[StepItem | Rule, ...]:
    """The backward pass's entries: a :class:`Rule` where the steps move to another head (several
    heads only), then each step, numbered on from ``number``."""
    out: list[StepItem | Rule] = []
    shown: tuple[int | None, int | None] = (None, None)
    for step in back:
        if ex.num_heads > 1 and (step.head, step.kv_head) != shown:
            shown = (step.head, step.kv_head)
            if step.kv_head is not None:  # a group's K/V gradients: its K/V head's, once
                out.append(Rule(t("explain.kv_head", kv=step.kv_head + 1, heads=_listed(str(h + 1) for h in step.shared))))
            else:
                out.append(Rule(t("explain.head", head=step.head + 1) if step.head is not None else t("explain.layer")))
        number += 1
        out.append(item(number, step))
    return tuple(out)


def _rows(m: Matrix) -> tuple[str, ...]:
    return tuple(f"r{i + 1}" for i in range(len(m)))


def _weights(ex: Exercise, h: int) -> tuple[Named, ...]:
    """Head ``h``'s weights and biases (with ``mla``: W_Q and its up-projections W_UK, W_UV)."""
    head = ex.heads[h]
    kv = (("W_K", head.w_k), ("W_V", head.w_v)) if ex.mla is None else (("W_UK", ex.mla.w_uk[h]), ("W_UV", ex.mla.w_uv[h]))
    named = [Named(name, m, _rows(m)) for name, m in (("W_Q", head.w_q), *kv)]
    named += [Named(name, (b,), ("",)) for name, b in (("b_Q", head.b_q), ("b_K", head.b_k), ("b_V", head.b_v))
              if b is not None]
    return tuple(named)


def _latent_weights(ex: Exercise) -> tuple[Named, ...]:
    """W_DKV, the down-projection to multi-head latent attention's latent (format v3, ``mla``)."""
    return () if ex.mla is None else (Named("W_DKV", ex.mla.w_dkv, _rows(ex.mla.w_dkv)),)


def _output_weights(ex: Exercise) -> tuple[Named, ...]:
    """W_O and b_O, when the exercise has them."""
    if ex.w_o is None:
        return ()
    named = [Named("W_O", ex.w_o, _rows(ex.w_o))]
    if ex.b_o is not None:
        named.append(Named("b_O", (ex.b_o,), ("",)))
    return tuple(named)


def _header(ex: Exercise, production_notes: tuple[Text, ...]) -> Header:
    h0 = ex.heads[0]
    mask = None
    if ex.mask_kind == "causal":
        mask = t("explain.mask.causal")
    elif ex.mask_kind == "matrix":
        mask = t("explain.mask.matrix")
    elif ex.mask_kind == "sliding_window":  # issue 23
        mask = t("explain.mask.window.sinks" if ex.sinks else "explain.mask.window", W=ex.window, S=ex.sinks)
    padding = None
    if ex.key_padding is not None:
        pads = [ex.key_labels[j] for j, keep in enumerate(ex.key_padding) if not keep]
        padding = t("explain.mask.padding", keys=_listed(pads) or "-")
    inputs = [Named("X_past", ex.past_x, ex.past_labels)] if ex.past_x is not None else []
    inputs.append(Named("X", ex.x, ex.query_labels))
    if ex.x_kv is not None:
        inputs.append(Named("X_kv", ex.x_kv, ex.key_labels))
    return Header(
        title=ex.local_title, id=ex.id, source=ex.source, description=reflow(ex.local_description) if ex.local_description else None,
        sizes=t("explain.sizes", L=ex.L, L_k=ex.L_k, d_model=ex.d_model, heads=ex.num_heads, d_k=h0.d_k, d_v=h0.d_v,
                d_out=ex.d_out),
        mask=mask, mask_matrix=ex.mask if ex.mask_kind in ("matrix", "sliding_window") else None,
        mask_notes=tuple(str(n) for n in production_notes) if ex.mask_kind == "causal" else (),  # causal with L ≠ L_k, or on cross-attention
        padding=padding, v2=_v2_lines(ex) + window_lines(ex), inputs=tuple(inputs))


def _v2_lines(ex: Exercise) -> tuple[str, ...]:
    """Sentences describing the v2 parts of ``ex``: the causal alignment, grouped K/V heads, the cache,
    the bias; empty for a v1 exercise."""
    out = []
    if ex.mask_kind == "causal_lower_right":
        out.append(t("explain.mask.causal_lower_right", offset=ex.L_k - ex.L))
    elif ex.mask_kind == "causal" and ex.L != ex.L_k:
        out.append(t("explain.mask.causal_top_left"))
    if ex.grouped:
        out.append(t("explain.v2.grouped", G=ex.num_kv_heads, H=ex.num_heads, ratio=ex.num_heads // ex.num_kv_heads))
    if ex.has_cache:
        k = "X_past·W_K" + (" + b_K" if any(h.b_k is not None for h in ex.heads) else "")
        v = "X_past·W_V" + (" + b_V" if any(h.b_v is not None for h in ex.heads) else "")
        out.append(t("explain.v2.cache.past_x" if ex.past_x is not None else "explain.v2.cache", L_past=ex.L_past,
                     labels=_listed(ex.past_labels), L=ex.L, k=k, v=v))
    if ex.alibi:
        out.append(t("explain.v2.alibi", slopes=_listed(frac_text(alibi_slope(h, ex.num_heads)) for h in range(ex.num_heads))))
    elif ex.has_bias:
        out.append(t("explain.v2.attn_bias"))
    return tuple(out)


# --- issue 23: the sliding window's positions and its rolling buffer cache -----------------------------------


def window_lines(ex: Exercise) -> tuple[str, ...]:
    """With a sliding window and a KV cache: where the new queries sit among the keys, and Mistral's rolling
    buffer cache after the last new token is written (:func:`tutor.exercise.record.window_slots`): the slots and
    the positions they hold, the cached keys that left the window (overwritten, never read again), and why the
    buffer never grows past ``W`` (plus the sinks' own slots).  Empty otherwise."""
    if ex.mask_kind != "sliding_window" or not ex.has_cache:
        return ()
    assert ex.window is not None
    labels = ex.key_labels
    last = ex.L_k - 1  # the last new token's position
    sinks, slots = window_slots(last, ex.window, ex.sinks)
    held = t("list.sep").join(t("explain.window.slot", slot=s, key=labels[p]) for s, p in slots)
    # the cached keys no new query reads: out of the first new query's window (and of every later one's), no sink
    dropped = [labels[p] for p in range(ex.L_past) if p <= ex.L_past - ex.window and p >= ex.sinks]
    out = [t("explain.window.positions", L_past=ex.L_past, first=labels[ex.L_past])]
    if dropped:
        out.append(t("explain.window.buffer", W=ex.window, last=labels[last], held=held, dropped=t("list.sep").join(dropped)))
    else:
        out.append(t("explain.window.buffer.none_dropped", W=ex.window, last=labels[last], held=held))
    if ex.sinks:
        out.append(t("explain.window.buffer.sinks", S=ex.sinks, sinks=t("list.sep").join(labels[p] for p in sinks)))
    return tuple(out)
