"""Write new exercises whose intermediate numbers are small enough for paper.

``generate(Spec(tokens=3, d_model=4, heads=1, d_k=2, seed=7))`` returns the
text of a commented, valid exercise file; :func:`like` draws fresh numbers
for the shape of an existing exercise (``attn-tutor new --like ID``,
``practice ID --fresh``).  The same spec (same seed) always gives the same
text.

One core for both formats, in four steps: the spec (:mod:`.spec`: the
options, v1 and v2), the shape numbers are drawn for (:mod:`.shape`), the
one drawing loop (:mod:`.draw`), the draft and the one writer
(:mod:`.draft`, :mod:`.write`).  Format v2 is what each step adds for its
fields: K/V heads shared by groups of query heads, a cache (the numbers
drawn for the whole sequence, the cached tokens' K and V written), the
lower-right mask and ALiBi.  Pure: no printing, no files.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction
from typing import TYPE_CHECKING

from ..base.errors import ShapeError
from ..base.messages import language, t, use_language
from ..exercise.block import row_ok
from .draft import Draft, as_asked, drafted
from .draw import GROUP_TRIES, LEVELS, Candidate, Level, draw, matmul, plus, transposed
from .shape import Shape, shape_of, spec_shape
from .spec import Spec, command_line, default_id, default_title, naming_options, tags
from .write import text

if TYPE_CHECKING:
    from ..exercise.record import Exercise

__all__ = ["Spec", "fresh", "generate", "like", "like_command", "like_id"]


def generate(spec: Spec) -> str:
    """The text of a new, commented exercise file for ``spec`` (deterministic for its seed).

    Unless ``spec.allow_dull``, the numbers avoid dull exercises and tell the
    classic mistakes apart where the shape allows (:mod:`tutor.authoring.draw`).
    Raises ``ValueError`` for a spec outside the format's limits, and
    :class:`~tutor.authoring.spec.SpecError` (a ``ValueError``) for v2
    options that cannot go together.
    """
    spec.check()
    text_ = _generate_once(spec, spec.seed)
    draw_seed = spec.seed
    for _ in range(GROUP_TRIES if spec.post_norm else 0):  # post-norm: a row of X + output the norm cannot divide
        if _post_norm_divides(text_):
            break
        draw_seed = random.Random(draw_seed).randrange(2**31)
        text_ = _generate_once(spec, draw_seed)
    return text_


def _post_norm_divides(text_: str) -> bool:
    """Whether every row of X + output of a drawn post-norm exercise has a variance (mean square) the norm can
    divide by (:func:`tutor.steps.solve` refuses a 0 in one line)."""
    from ..base.errors import TutorError
    from ..exercise.load import parse_exercise
    from ..steps import solve

    try:
        solve(parse_exercise(text_, "<new>"))
    except TutorError:
        return False
    return True


def _generate_once(spec: Spec, draw_seed: int) -> str:
    """:func:`generate`'s text with the numbers of ``draw_seed`` (the file names ``spec.seed``)."""
    shape = spec_shape(spec)
    pre = None if spec.post_norm else spec.norm  # post-norm normalizes X + output: X is drawn as without a norm
    c = _drawn(shape, LEVELS[spec.draw_level], draw_seed, spec.allow_dull, pre, Fraction(0))
    def words() -> tuple[str, str]:
        key = ("new.file.description.rope" if spec.rope is not None
               else "new.file.description.mla" if spec.mla is not None
               else "new.file.description.text.postnorm" if spec.post_norm
               else "new.file.description.text" + (".norm" if spec.norm else ""))  # new refuses rope with norm
        return spec.title or default_title(spec), t(key, seed=spec.seed)

    (title, description), translations = _in_english(words)
    d = drafted(shape, c, id=spec.id or default_id(spec), title=title, description=description,
                command=command_line(spec), tags=tags(spec), difficulty=spec.level)
    d = replace(d, translations=translations, norm=spec.norm, residual=spec.residual,
                norm_placement="post" if spec.post_norm else None)
    if spec.mla is not None:
        d = latent(d, spec.mla, spec.seed)
    return text(as_asked(d, spec) if spec.is_v2 or spec.rope is not None else d)  # v2's parts, v3's RoPE


#: Draws of MLA's weights at most until the scores are small (:func:`latent`).
LATENT_TRIES = 50
#: The largest score a drawn MLA exercise keeps (|Q·Kᵀ|), as the rest of ``new`` keeps them small for paper.
LATENT_MAX_SCORE = 12


def latent(d: Draft, d_c: int, seed: int) -> Draft:
    """``d`` as multi-head latent attention with a latent of width ``d_c`` (DeepSeek-V2, §2.1.2): ``W_DKV
    [d_model, d_c]`` of 0s and 1s (each column one or two 1s) and each head's ``W_UK [d_c, d_k]``, ``W_UV
    [d_c, d_v]`` of small integers (each column one or two non-zero entries), drawn from ``seed`` until no
    K is all zero or equal to its V and every score ``|Q·Kᵀ|`` is at most :data:`LATENT_MAX_SCORE`.  The heads' ``w_k``, ``w_v``
    become the products ``W_DKV·W_UK``, ``W_DKV·W_UV``: the K and V the loader computes, so the ranges the
    file's comment states are theirs.  The absorbed scores ``(Q·W_UKᵀ)·c_KVᵀ`` equal ``Q·Kᵀ`` whatever is
    drawn (associativity); K/V biases are left out (``mla`` has none)."""
    from .draw import _weight

    rng = random.Random(seed * 7919 + d_c)
    kv = d.x_kv if d.x_kv is not None else d.x  # [L_k, d_kv]: what K and V are projected from
    dm = len(kv[0])
    best: tuple[int, Draft] | None = None
    for _ in range(LATENT_TRIES):
        w_dkv = _weight(rng, dm, d_c, (1,))  # [d_model, d_c]
        ups = tuple((_weight(rng, d_c, len(w.w_q[0]), (1, -1, 2)), _weight(rng, d_c, len(w.w_v[0]), (1, -1, 2)))
                    for w in d.heads)  # [d_c, d_k], [d_c, d_v]
        heads = tuple(replace(w, w_k=matmul(w_dkv, uk), w_v=matmul(w_dkv, uv), b_k=None, b_v=None)
                      for w, (uk, uv) in zip(d.heads, ups))
        top, flat = 0, False
        for w in heads:
            k = matmul(kv, w.w_k)  # [L_k, d_k]
            flat |= all(e == 0 for row in k for e in row) or k == matmul(kv, w.w_v)  # K = V hides weights·K
            top = max([top] + [abs(e) for row in matmul(plus(matmul(d.x, w.w_q), w.b_q), transposed(k)) for e in row])
        made = replace(d, heads=heads, fused=False, mla=(d_c, w_dkv, ups))
        if not flat and (best is None or top < best[0]):
            best = (top, made)
        if not flat and top <= LATENT_MAX_SCORE:
            break
    if best is None:  # every draw had a K all zero or equal to its V: the last one, which validate then notes
        return made
    return best[1]


def _drawn(shape: Shape, level: Level, seed: int, allow_dull: bool, norm: str | None, eps: Fraction) -> Candidate:
    """:func:`~tutor.authoring.draw.draw`, drawn again (from a seed drawn from the last one, at most
    :data:`~tutor.authoring.draw.GROUP_TRIES` times) while a row of x is one the norm cannot divide or whose
    square root is too long to keep exact (:func:`tutor.exercise.block.row_ok`)."""
    varied = norm == "layernorm"  # no constant row: its variance is 0 (redrawn in draw, not refused after)
    c = draw(shape, level, seed, allow_dull, varied)
    for _ in range(GROUP_TRIES if norm is not None else 0):
        if all(row_ok([Fraction(v) for v in row], norm == "layernorm", eps) for row in c.x):
            break
        seed = random.Random(seed).randrange(2**31)
        c = draw(shape, level, seed, allow_dull, varied)
    return c


def like_id(ex: Exercise, seed: int) -> str:
    """``single-head-3x4-s7``: the id of the exercise ``new --like`` draws (at most 64 characters)."""
    tail = f"-s{seed}"
    return ex.id[:64 - len(tail)].rstrip("-") + tail


def like(ex: Exercise, seed: int, *, allow_dull: bool = False, id: str | None = None, title: str | None = None,
         source: str | None = None, student: str | None = None) -> str:
    """The text of a new exercise with ``ex``'s shape (:func:`~tutor.authoring.shape.shape_of`: the same
    tokens, sizes, heads, mask, key padding, biases and W_O) and fresh small integers drawn from ``seed``.

    The numbers follow ``ex``'s difficulty (1 when it has none) and the
    rules of :func:`generate`: Q, K, V and the scores are small integers,
    and the exercise is not dull unless ``allow_dull``.  Deterministic for
    ``(ex, seed)``.  ``source``: how the command written in the file names
    ``ex`` (its file, its pack option), when its id alone would not find it.
    ``student`` (no ``title``): the title is ``handouts.title`` (a per-student variant), in English in
    ``title:`` and in the run's language in the file's translation (``new --student``).
    Raises ``ValueError`` when ``ex`` is beyond the format's limits, and
    :class:`~tutor.base.errors.ShapeError` (a ``ValueError``) when ``ex`` uses format
    v2 (grouped K/V heads, a cache, a bias) or v3's ``mla``: its shape is not drawn afresh.
    """
    if ex.mla is not None:  # format v3's latent is not drawn: fresh numbers would lose it (issue 23)
        raise ShapeError(t("new.like.mla", id=ex.id))
    if ex.is_v2:
        raise ShapeError(t("new.like.v2", id=ex.id))
    text_ = _like_once(ex, seed, allow_dull, id, title, source, seed, student)
    if ex.post_norm:  # post-norm (issue 23): draw again while a row of X + output is one the norm cannot divide
        draw_seed = seed
        for _ in range(GROUP_TRIES):
            if _post_norm_divides(text_):
                break
            draw_seed = random.Random(draw_seed).randrange(2**31)
            text_ = _like_once(ex, draw_seed, allow_dull, id, title, source, seed, student)
        return text_
    if not ex.has_norm or allow_dull:
        return text_
    # the draw keeps every mistake visible on X as drawn; the norm can make the scores symmetric after all
    # (X_norm's rows): draw again, from seeds drawn from this one, while the norm hides more than the sizes force
    draw_seed = seed
    for _ in range(GROUP_TRIES):
        if not _hides_more_than_its_sizes(text_):
            break
        draw_seed = random.Random(draw_seed).randrange(2**31)
        text_ = _like_once(ex, draw_seed, allow_dull, id, title, source, seed, student)
    return text_


def _hides_more_than_its_sizes(text_: str) -> bool:
    """Whether a drawn exercise hides a core mistake that its sizes do not force (d_k = 1, d_k = d_model)."""
    from ..exercise.load import parse_exercise
    from ..mistakes.invisible import uncaught
    from ..steps import solve

    ex = parse_exercise(text_, "<new>")
    forced = {"no_scaling"} if any(h.d_k == 1 for h in ex.heads) else set()
    forced |= {"scale_sqrt_d_model"} if any(h.d_k == ex.d_model for h in ex.heads) else set()
    return not {key for key, _ in uncaught(solve(ex))} <= forced


def _like_once(ex: Exercise, seed: int, allow_dull: bool, id: str | None, title: str | None, source: str | None,
               named: int, student: str | None = None) -> str:
    """:func:`like`'s text from the numbers of ``seed``; the file names the seed the user gave, ``named``."""
    shape = shape_of(ex)
    level = ex.difficulty or 1
    c = _drawn(shape, LEVELS[level], seed, allow_dull, ex.norm if ex.has_norm else None, ex.norm_eps)
    command = like_command(source or ex.id, named, allow_dull=allow_dull, id=id, title=title, student=student)
    def words() -> tuple[str, str]:
        key = ("new.like.description.rope" if ex.rope is not None  # RoPE: scores in cos, sin
               else "new.like.description" + (".norm" if ex.has_norm else ""))
        called = (" ".join(t("handouts.title", title=ex.local_title, student=" ".join(student.split())).split())
                  if student is not None else t("new.like.title", title=ex.local_title))
        return title or called, t(key, id=ex.id, seed=named)

    (english_title, description), translations = _in_english(words)
    d = drafted(shape, c, id=id or like_id(ex, named), title=english_title, description=description, command=command,
                tags=["generated", *(tag for tag in ex.tags if tag != "generated")], difficulty=level)
    window = (ex.window, ex.sinks) if ex.window is not None else None  # issue 23: the window kept as a window
    rope = None if ex.rope is None else (ex.rope.base, ex.rope.pairing)  # RoPE (format v3) kept as it was
    return text(replace(d, translations=translations, rope=rope, norm=ex.norm, residual=ex.residual,
                        norm_eps=None if not ex.norm_eps else str(ex.norm_eps), window=window,
                        norm_placement="post" if ex.post_norm else None))


def like_command(source: str, seed: int, *, allow_dull: bool = False, id: str | None = None,
                 title: str | None = None, student: str | None = None) -> str:
    """The ``new --like`` command a drawn file says it was written by, and that writes it again: ``source``
    names the exercise (its id, or its file and pack options, already quoted for a shell), then the seed and
    each option that changes the text (``--id``, ``--title`` and ``--student`` too, so that a per-student
    variant of ``handouts`` is written again byte for byte), and ``--lang`` when the run's language is not
    English (the file's comments and its translation are in it)."""
    return (f"attn-tutor new --like {source} --seed {seed}" + (" --allow-dull" if allow_dull else "")
            + naming_options(id, title, student))


def _in_english(words: Callable[[], tuple[str, str]]) -> tuple[tuple[str, str], tuple[tuple[str, str, str], ...]]:
    """A new file's title and description in English (the format's own language), and, when the run speaks
    another, the same words in it, for the file's ``translations``."""
    with use_language("en"):
        english = words()
    if language() == "en":
        return english, ()
    return english, ((language(), *words()),)


def fresh(ex: Exercise, seed: int) -> Exercise:
    """Exercise ``ex`` with fresh numbers (:func:`like`, the same seed as ``new --like``), keeping ``ex``'s
    id so that practice on it is recorded under the original exercise."""
    from ..exercise import parse_exercise

    return parse_exercise(like(ex, seed, id=ex.id), f"{ex.id} --fresh --seed {seed}")
