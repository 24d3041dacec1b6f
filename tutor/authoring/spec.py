"""What ``attn-tutor new`` is asked for (:class:`Spec`), and the words it implies: the id, the title,
the command that writes the file again, the tags.

One spec for both formats: the format-v2 options (``--kv-heads``,
``--cache``, ``--mask causal_lower_right``, ``--alibi``) are fields that
default to "not asked", and each function below adds their part when they
are set.  Pure: no printing, no files.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..base.messages import language, plural, t
from ..exercise.checks import LIMITS

MASKS = ("none", "causal", "padding")
V2_MASKS = ("causal_lower_right",)  # with --cache or --cross (format v2)
MAX_KEYS = 16  # --cache plus --tokens: the keys of a decode step
NORMS = ("rmsnorm", "layernorm")  # --norm (issue 23)


class SpecError(ValueError):
    """A v2 spec that cannot be an exercise: the sentence, and the option it is about (``--kv-heads``)."""

    def __init__(self, message: str, option: str):
        super().__init__(message)
        self.option = option


#: RoPE's base in a generated exercise (RoFormer's): with it d_k = 2, 4 and 8 keep every angle rational.
ROPE_BASE = 10000


@dataclass(frozen=True)
class Spec:
    """What to generate.  ``cross`` is ``L_k`` for cross-attention (K and V from ``x_kv``), else ``None``;
    ``allow_dull``: keep the first numbers within bounds even when they are dull
    (:func:`tutor.authoring.draw.pick`).  Format v2: ``kv_heads`` K/V heads shared by the query heads,
    a decode step after ``cache`` cached tokens, ``alibi``'s bias, ``mask="causal_lower_right"``."""

    tokens: int = 3
    d_model: int = 4
    heads: int = 1
    d_k: int = 2
    mask: str = "none"
    cross: int | None = None
    seed: int = 0
    difficulty: int | None = None
    id: str | None = None
    title: str | None = None
    allow_dull: bool = False
    kv_heads: int | None = None
    cache: int | None = None
    alibi: bool = False
    rope: str | None = None  # format v3 (issue 23): "interleaved" or "half", base 10000
    norm: str | None = None  # the pre-norm block (issue 23): "rmsnorm" or "layernorm"
    residual: bool = False
    window: int | None = None  # issue 23: mask {sliding_window: window, sinks: sinks}, drawn as causal
    sinks: int | None = None
    norm_placement: str | None = None  # issue 23: "pre" (the default) or "post" (X + output normalized; needs residual)
    mla: int | None = None  # issue 23: multi-head latent attention with a latent of width d_c (1 or 2)

    @property
    def post_norm(self) -> bool:
        """Whether the norm is post-norm's: ``X + output`` normalized after the residual."""
        return self.norm is not None and self.norm_placement == "post"

    def check(self) -> None:
        """Raise ``ValueError`` when a size is outside the format's limits or the mask is unknown, and
        :class:`SpecError` (:meth:`check_v2`) for v2 options that cannot go together."""
        for name, value, limit in (("tokens", self.tokens, LIMITS["L"]), ("d_model", self.d_model, LIMITS["d_model"]),
                                   ("heads", self.heads, LIMITS["heads"]), ("d_k", self.d_k, LIMITS["d_k"]),
                                   ("cross", self.cross or 1, LIMITS["L_k"]), ("difficulty", self.difficulty or 1, 5)):
            if not 1 <= value <= limit:
                raise ValueError(f"{name} must be between 1 and {limit}, found {value}")
        if self.heads * self.d_k > LIMITS["d_out"]:
            raise ValueError(f"heads x d_k must be at most {LIMITS['d_out']} (the heads are concatenated into the output), "
                             f"found {self.heads} x {self.d_k} = {self.heads * self.d_k}")
        if self.mask not in MASKS + V2_MASKS:
            raise ValueError(f"mask must be one of {', '.join(MASKS)}, found {self.mask!r}")
        if self.mask == "padding" and (self.cross or self.tokens) + (self.cache or 0) < 2:
            raise ValueError("padding needs at least two keys: one to pad and one to attend")
        self.check_v2()

    def check_v2(self) -> None:
        """Raise :class:`SpecError` (one sentence, from the catalogue) for v2 options that cannot be an exercise."""
        H = self.heads
        if self.kv_heads is not None and (self.kv_heads > H or H % self.kv_heads):
            raise SpecError(t("new.kv_heads.divide", G=self.kv_heads, H=H), "--kv-heads")
        if self.cache is not None and self.cross is not None:
            raise SpecError(t("new.cache.cross"), "--cache")
        if self.cache is not None and self.cache + self.tokens > MAX_KEYS:
            raise SpecError(t("new.cache.limit", total=self.cache + self.tokens), "--cache")
        if self.mask == "causal_lower_right" and self.cache is None and self.cross is None:
            raise SpecError(t("new.lower_right.alone"), "--mask")
        if self.alibi and self.cross is not None:
            raise SpecError(t("new.alibi.cross"), "--alibi")
        if self.sinks is not None and self.window is None:
            raise SpecError(t("new.sinks.alone"), "--sinks")
        if self.window is not None and self.cross is not None:
            raise SpecError(t("new.window.cross"), "--window")
        if self.window is not None and self.mask not in ("causal", "causal_lower_right"):
            raise SpecError(t("new.window.mask", mask=self.mask), "--window")
        if self.rope is not None:  # format v3: RoPE, base 10000 (issue 23)
            from ..exercise.record import rope_thetas

            if self.cross is not None or self.alibi or self.cache is not None:
                other = "--cross" if self.cross is not None else "--alibi" if self.alibi else "--cache"
                raise SpecError(t("new.rope.with", option=other), "--rope")
            if rope_thetas(ROPE_BASE, self.d_k) is None:
                raise SpecError(t("new.rope.d_k", d_k=self.d_k, base=ROPE_BASE), "--rope")
        # the pre-norm block (issue 23): self-attention of format v1
        if self.norm is not None and self.norm not in NORMS:
            raise SpecError(t("new.norm.unknown", found=self.norm), "--norm")
        if self.norm == "layernorm" and self.d_model < 2:  # one entry is its own mean: the variance is 0
            raise SpecError(t("new.norm.layernorm_d_model", d_model=self.d_model), "--d-model")
        if self.norm is not None or self.residual:
            option = "--norm" if self.norm is not None else "--residual"
            for given, name in ((self.cross is not None, "--cross"), (self.cache is not None, "--cache"),
                                (self.kv_heads is not None, "--kv-heads"), (self.alibi, "--alibi"),
                                (self.rope is not None, "--rope")):  # rope with the block: refused (tutor.exercise.rope)
                if given:
                    raise SpecError(t("new.block.not_with", option=option, other=name), option)
        if self.norm_placement is not None and self.norm is None:
            raise SpecError(t("new.norm_placement.alone"), "--norm-placement")
        if self.post_norm and not self.residual:  # post-norm normalizes X + output
            raise SpecError(t("new.norm_placement.post.residual"), "--norm-placement")
        self._check_mla()

    def _check_mla(self) -> None:
        """``--mla d_c`` (issue 23): multi-head latent attention's latent of width 1 or 2 (what the format refuses
        with ``mla`` is refused here in one line: a cache, grouped K/V heads, RoPE, a norm, a residual; and a
        sliding window, not drawn with a latent yet)."""
        if self.mla is None:
            return
        if self.mla not in (1, 2):
            raise SpecError(t("new.mla.d_c", d_c=self.mla), "--mla")
        for given, name in ((self.cache is not None, "--cache"), (self.kv_heads is not None, "--kv-heads"),
                            (self.rope is not None, "--rope"), (self.norm is not None, "--norm"),
                            (self.residual, "--residual"), (self.window is not None, "--window")):
            if given:
                raise SpecError(t("new.mla.with", option=name), "--mla")

    @property
    def is_v2(self) -> bool:
        """Whether a format-v2 option is asked for (grouped K/V heads, a cache, ALiBi, the lower-right mask)."""
        return self.kv_heads is not None or self.cache is not None or self.alibi or self.mask == "causal_lower_right" \
            or self.window is not None

    @property
    def level(self) -> int:
        """The difficulty the file states: given, else 1 plus one for each of several heads, a mask,
        cross-attention, a cache, ALiBi (at most 5)."""
        if self.difficulty is not None:
            return self.difficulty
        return min(5, self.draw_level + (self.cache is not None) + self.alibi + (self.rope is not None) + (self.norm is not None))

    @property
    def draw_level(self) -> int:
        """The difficulty the numbers are drawn at: :attr:`level` without what a cache and ALiBi add
        (the numbers are drawn for the whole sequence, and the bias is not drawn)."""
        if self.difficulty is not None:
            return self.difficulty
        return min(5, 1 + (self.heads > 1) + (self.mask != "none") + (self.cross is not None))

    @property
    def L_k(self) -> int:
        """The number of keys drawn for: ``cross``, else ``tokens``."""
        return self.cross if self.cross is not None else self.tokens


def default_id(spec: Spec) -> str:
    """``gen-3x4-h1-dk2-s7`` (+ ``-causal``/``-padding``/``-causal-lower-right``, ``-cross3``,
    ``-kv1``, ``-cache3``, ``-alibi`` before the seed)."""
    parts = [f"gen-{spec.tokens}x{spec.d_model}-h{spec.heads}-dk{spec.d_k}"]
    if spec.mask != "none":
        parts.append(spec.mask.replace("_", "-"))
    if spec.cross is not None:
        parts.append(f"cross{spec.cross}")
    if spec.kv_heads is not None:
        parts.append(f"kv{spec.kv_heads}")
    if spec.cache is not None:
        parts.append(f"cache{spec.cache}")
    if spec.alibi:
        parts.append("alibi")
    if spec.rope is not None:
        parts.append(f"rope-{spec.rope}")
    if spec.norm is not None:
        parts.append(spec.norm + ("-post" if spec.post_norm else ""))
    if spec.residual:
        parts.append("residual")
    if spec.mla is not None:
        parts.append(f"mla{spec.mla}")
    if spec.window is not None:
        parts.append(f"window{spec.window}" + (f"-sinks{spec.sinks}" if spec.sinks else ""))
    tail = f"-s{spec.seed}"  # the seed is kept whole; the shape's last words are left out to fit in 64 characters
    while len(parts) > 1 and len("-".join(parts)) + len(tail) > 64:
        parts.pop()
    return "-".join(parts) + tail


def _word(n: int) -> str:
    """``n`` as the catalogue spells it in a title (``three``, up to eight), else its digits."""
    try:
        return t(f"new.number.{n}")
    except KeyError:
        return str(n)


def default_title(spec: Spec) -> str:
    """``Three tokens, d_model = 4, one head with d_k = 2`` and the mask, cross-attention, and what
    the v2 options add (K/V heads, the cache, the alignment, ALiBi)."""
    title = t("new.title", tokens=plural("new.title.tokens", spec.tokens, word=_word(spec.tokens)), d_model=spec.d_model,
              heads=plural("new.title.heads", spec.heads, word=_word(spec.heads)), d_k=spec.d_k)
    features = []  # what the options add, a list after the shape
    if spec.cross is not None:
        features.append(plural("new.title.part.cross", spec.cross))
    if spec.mask == "causal":
        features.append(t("new.title.part.causal"))
    elif spec.mask == "padding":
        features.append(t("new.title.part.padding"))
    if spec.kv_heads is not None:
        features.append(plural("new.title.part.kv_heads", spec.kv_heads))
    if spec.cache is not None:
        features.append(plural("new.title.part.cache", spec.cache))
    if spec.mask == "causal_lower_right":
        features.append(t("new.title.part.lower_right"))
    if spec.alibi:
        features.append(t("new.title.part.alibi"))
    if spec.rope is not None:
        features.append(t("new.title.part.rope", pairing=spec.rope))
    if spec.norm is not None:
        features.append(t(f"new.title.part.post.{spec.norm}" if spec.post_norm else f"new.title.part.{spec.norm}"))
    if spec.mla is not None:
        features.append(t("new.title.part.mla", d_c=spec.mla))
    if spec.residual:
        features.append(t("new.title.part.residual"))
    if spec.window is not None:
        features.append(plural("new.title.part.window.sinks", spec.sinks, W=spec.window) if spec.sinks
                        else t("new.title.part.window", W=spec.window))
    if features:
        title = t("new.title.with", title=title, features=t("list.sep").join(features))
    return title[:1].upper() + title[1:]


def naming_options(id: str | None = None, title: str | None = None, student: str | None = None) -> str:
    """The options of a ``new`` command that change a file's text but not its numbers, quoted for a shell and
    each after a space: ``--id``, ``--title`` and ``--student`` (on one line, as the file has them) when given,
    and ``--lang`` when the run's language is not English (the file's comments and its translation are in
    it).  ``""`` for none."""
    import shlex

    out = ""
    if id is not None:
        out += f" --id {shlex.quote(id)}"
    if title is not None:
        out += f" --title {shlex.quote(' '.join(title.split()))}"  # the file's title is on one line
    if student is not None:
        out += f" --student {shlex.quote(' '.join(student.split()))}"
    if language() != "en":
        out += f" --lang {language()}"
    return out


def command_line(spec: Spec) -> str:
    """The ``attn-tutor new`` command that writes this exercise again, byte for byte: every option that
    changed the text, the seed, and :func:`naming_options`."""
    parts = ["attn-tutor new", f"--tokens {spec.tokens}", f"--d-model {spec.d_model}", f"--heads {spec.heads}",
             f"--d-k {spec.d_k}", f"--mask {spec.mask}"]
    if spec.cross is not None:
        parts.append(f"--cross {spec.cross}")
    if spec.difficulty is not None:
        parts.append(f"--difficulty {spec.difficulty}")
    if spec.kv_heads is not None:
        parts.append(f"--kv-heads {spec.kv_heads}")
    if spec.cache is not None:
        parts.append(f"--cache {spec.cache}")
    if spec.alibi:
        parts.append("--alibi")
    if spec.rope is not None:
        parts.append(f"--rope {spec.rope}")
    if spec.norm is not None:
        parts.append(f"--norm {spec.norm}")
    if spec.residual:
        parts.append("--residual")
    if spec.norm_placement is not None:
        parts.append(f"--norm-placement {spec.norm_placement}")
    if spec.mla is not None:
        parts.append(f"--mla {spec.mla}")
    if spec.window is not None:
        parts.append(f"--window {spec.window}" + (f" --sinks {spec.sinks}" if spec.sinks else ""))
    parts.append(f"--seed {spec.seed}")
    if spec.allow_dull:
        parts.append("--allow-dull")
    return " ".join(parts) + naming_options(spec.id, spec.title)


def tags(spec: Spec) -> list[str]:
    """The file's tags: ``generated``, single- or multi-head, the mask, cross-attention, and the v2 parts."""
    out = ["generated", "single-head" if spec.heads == 1 else "multi-head"]
    out += {"causal": ["mask", "causal"], "padding": ["mask", "padding"],
            "causal_lower_right": ["mask", "causal", "causal-alignment"]}.get(spec.mask, [])
    out += ["cross-attention"] if spec.cross is not None else []
    out += ["grouped-kv"] if spec.kv_heads is not None and spec.kv_heads < spec.heads else []
    out += ["kv-cache"] if spec.cache else []
    out += ["position-bias"] if spec.alibi else []
    out += ["rope"] if spec.rope is not None else []
    out += [("post-norm" if spec.post_norm else "pre-norm"), spec.norm] if spec.norm is not None else []
    out += ["latent-kv"] if spec.mla is not None else []
    out += ["residual"] if spec.residual else []
    out += ["sliding-window"] + (["attention-sinks"] if spec.sinks else []) if spec.window is not None else []
    return out
