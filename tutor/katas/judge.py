"""The verdict on a learner's run: each case passed or not, the wrong entries, and the mistake named.

A case passes when the code returned the kata's outputs, each an array of
the right shape whose entries are within :func:`tolerance` of the expected
ones (a boolean output: equal), and, where the called function's contract
names it (:attr:`tutor.katas.kata.Kata.dtype_of`), in the input's dtype.  An
array of complex numbers or objects is named as such (with the way back to
real numbers).  A failing case is diagnosed by matching:
:func:`diagnose` recomputes the case with the reference under each
catalogued mistake (:attr:`tutor.katas.kata.Kata.mistakes`) and keeps those
whose outputs equal the learner's and differ from the right ones, unless the
mistake would also have changed a case the code passed; a mistake
with no one value is asked its judge.  When no single mistake matches, two
at once are tried; when none does, the report says so and shows the first
wrong entry.  A wrong shape is explained axis by axis
(:func:`tutor.drills.record.explain_shape`).

Pure: no I/O, no printing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np

from ..base.messages import join_sentences, t
from ..drills.record import explain_shape
from .kata import Array, Case, Kata, Mistake
from .run import CaseRun, Run

__all__ = ["PROBLEMS", "CaseVerdict", "Diagnosis", "Report", "diagnose", "judge", "tolerance"]

MAX_WRONG = 6  # wrong entries listed per output
#: Diagnosis keys that are not a catalogued mistake: what went wrong when none is named.
PROBLEMS = frozenset({"unknown", "exception", "shape", "count", "type", "memory", "not_run", "dtype"})


@dataclass(frozen=True)
class Diagnosis:
    """A named mistake (``key``: a catalogued mistake's, or ``unknown``, ``shape``, ``exception`` …) and its sentence."""

    key: str
    message: str


@dataclass(frozen=True)
class CaseVerdict:
    """One case's verdict.  ``problem``: ``None`` (passed), ``exception``, ``count`` (not the number of
    outputs), ``type`` (an output not an array of real numbers), ``shape``, ``values``, ``dtype`` (the right
    values in another dtype than the contract's), ``memory``, ``not_run``; ``output`` the first wrong
    output's name; ``wrong`` its wrong entries (index, expected, got), at most :data:`MAX_WRONG`,
    and ``n_wrong`` how many there are; ``got`` the learner's arrays (``None`` for a non-array)."""

    case: Case
    passed: bool
    problem: str | None = None
    output: str | None = None
    wrong: tuple[tuple[tuple[int, ...], float, float], ...] = ()
    n_wrong: int = 0
    got: tuple[Array | None, ...] = ()
    diagnoses: tuple[Diagnosis, ...] = ()
    exception: str | None = None
    traceback: str = ""
    peak: int | None = None


@dataclass(frozen=True)
class Report:
    """The whole check: the kata, the flavour the file is in, every case's verdict."""

    kata: Kata
    flavour: str
    cases: tuple[CaseVerdict, ...] = field(default_factory=tuple)

    @property
    def passed(self) -> bool:
        return bool(self.cases) and all(c.passed for c in self.cases)

    @property
    def mistakes(self) -> tuple[str, ...]:
        """The keys named on failing cases, most often named first (what to fix); those named equally
        often in the order first named."""
        counts: dict[str, int] = {}
        for c in self.cases:
            for d in c.diagnoses:
                counts[d.key] = counts.get(d.key, 0) + 1
        return tuple(sorted(counts, key=lambda k: (k in PROBLEMS, -counts[k])))  # catalogued mistakes first


def tolerance(dtype: str) -> tuple[float, float]:
    """``(rtol, atol)`` an entry may stray by: float32's round-off over a few hundred operations
    (``rtol 1e-4``, ``atol 1e-5``), float64's (``1e-7``, ``1e-9``)."""
    return (1e-4, 1e-5) if dtype == "float32" else (1e-7, 1e-9)


def _array(sent: Mapping[str, Any]) -> Array | None:
    if "dtype" not in sent:
        return None
    kind = bool if sent["dtype"] == "bool" else np.float64
    try:
        return np.array(sent["data"], dtype=kind).reshape(sent["shape"])
    except (TypeError, ValueError):  # a complex or object array
        return None


def _close(a: Array, b: Array, dtype: str, loose: float = 1.0) -> bool:
    if a.shape != b.shape:
        return False
    if a.dtype == bool or b.dtype == bool:
        return bool(np.array_equal(a.astype(float), b.astype(float)))
    rtol, atol = tolerance(dtype)
    return bool(np.allclose(a, b, rtol=rtol * loose, atol=atol * loose, equal_nan=True))


def _same(a: Array, b: Array, dtype: str) -> bool:
    """The same outputs up to round-off, and up to size-1 axes (weights averaged into ``[B, L, L]`` or ``[B, 1, L, L]``)."""
    if a.shape != b.shape and a.size == b.size and np.squeeze(a).shape == np.squeeze(b).shape:
        a, b = np.squeeze(a), np.squeeze(b)
    return _close(a, b, dtype, loose=10.0)


def _wrong_entries(want: Array, got: Array, dtype: str) -> tuple[list[tuple[tuple[int, ...], float, float]], int]:
    if want.dtype == bool or got.dtype == bool:
        bad = want.astype(float) != got.astype(float)
    else:
        rtol, atol = tolerance(dtype)
        with np.errstate(invalid="ignore"):
            bad = ~np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    where = [tuple(int(i) for i in idx) for idx in np.argwhere(bad)]
    return [(i, float(want[i]), float(got[i])) for i in where[:MAX_WRONG]], len(where)


def judge(kata: Kata, cases: Sequence[Case], run: Run) -> Report:
    """Every case of ``run`` judged against ``cases`` (those the run called, in order), mistakes named."""
    by_id = {c.id: c for c in cases}
    reported = {r.id: r for r in reversed(run.cases) if r.id in by_id}  # the first report of an id counts
    verdicts = [_verdict(kata, c, reported[c.id], run.flavour or "numpy") for c in cases if c.id in reported]
    if run.status == "ran":  # every case the flavour has must have been reported: none skipped
        flavour = run.flavour or "numpy"
        verdicts += [CaseVerdict(c, False, "not_run", diagnoses=(Diagnosis("not_run", t("code.not_run")),))
                     for c in cases if c.only in (None, flavour) and c.id not in reported]
    passed = {v.case.id: v.passed for v in verdicts}
    # the small cases the code got right: a mistake that would have changed one of them is not the code's
    passing = tuple(v.case for v in verdicts if v.passed and _size(v.case) <= LARGE)
    named: dict[str, CaseVerdict] = {}
    # small cases first: a large one (the online softmax's traced case) is asked only the mistakes named on them
    for v in sorted(verdicts, key=lambda v: _size(v.case)):
        if v.passed or v.problem in ("exception", "count", "type", "memory", "not_run", "dtype"):
            named[v.case.id] = v
            continue
        seen = {d.key for n in named.values() for d in n.diagnoses if d.key not in PROBLEMS}
        only = seen if _size(v.case) > LARGE and seen else None
        named[v.case.id] = _named(kata, v, passed, only, passing)
    return Report(kata, run.flavour or "numpy", tuple(named[v.case.id] for v in verdicts))


#: A case whose work is more than this is large: recomputing it under every mistake (and every pair of
#: them) would take seconds, so it is asked the mistakes the small cases showed, or single ones.
LARGE = 50_000


def _size(case: Case) -> int:
    """A case's work: its expected entries, or its scores' (``B·H·L_q·L_k``), whichever is more."""
    z = case.sizes
    L_q, L_k = z.get("L_q", z.get("L", 1)), z.get("L_k", z.get("L", 1))
    return max(sum(int(e.size) for e in case.expected), z.get("B", 1) * z.get("H", 1) * L_q * L_k)


def _not_real(spec_name: str, sent: Mapping[str, Any], case: Case, flavour: str, shape: str) -> Diagnosis | None:
    """An array of complex numbers, objects or strings (the harness sends its dtype, not its entries): what it
    is and how to turn it back into the real array the kata asks for (``None``: not such an array)."""
    dtype = sent.get("array_dtype")
    if not isinstance(dtype, str):
        return None
    if "complex" not in dtype:
        return Diagnosis("type", t("code.output_not_numeric", name=spec_name, dtype=dtype, shape=shape))
    pairing = case.inputs.get("pairing") if isinstance(case.inputs, Mapping) else None
    if pairing not in ("half", "interleaved"):
        return Diagnosis("type", t("code.output_complex_plain", name=spec_name, dtype=dtype, shape=shape))
    fix = {("torch", "interleaved"): "torch.view_as_real(z).flatten(-2)",
           ("torch", "half"): "torch.cat([z.real, z.imag], dim=-1)",
           ("numpy", "interleaved"): "np.stack([z.real, z.imag], axis=-1).reshape(*z.shape[:-1], -1)",
           ("numpy", "half"): "np.concatenate([z.real, z.imag], axis=-1)"}[(flavour, str(pairing))]
    return Diagnosis("type", t(f"code.output_complex.{pairing}", name=spec_name, dtype=dtype, shape=shape, fix=fix))


#: Real float dtypes as the harness names them: a result in one of these but not the case's breaks a
#: kata whose contract names the dtype (:attr:`tutor.katas.kata.Kata.dtype_of`).
_FLOATS = frozenset({"float16", "bfloat16", "float32", "float64"})


def _wrong_dtype(kata: Kata, case: Case, sent: Sequence[Mapping[str, Any]], flavour: str) -> Diagnosis | None:
    """The first output in a float dtype other than the case's, when the called function's contract says the
    result keeps its input's dtype (``x_rot`` in ``x``'s); ``None`` when every output keeps it."""
    arg = kata.dtype_of.get(case.call or kata.numpy_name)
    if arg is None:
        return None
    for spec, o in zip(kata.outputs_of(case), sent, strict=True):
        found = o.get("dtype")
        if found in _FLOATS and found != case.dtype:
            fix = f"{spec.name}.to({arg}.dtype)" if flavour == "torch" else f"{spec.name}.astype({arg}.dtype)"
            return Diagnosis("dtype", t("code.output_dtype", name=spec.name, found=found, expected=case.dtype,
                                        arg=arg, fix=fix))
    return None


def _verdict(kata: Kata, case: Case, r: CaseRun, flavour: str = "numpy") -> CaseVerdict:
    if r.outputs is None:
        return CaseVerdict(case, False, "exception", exception=r.exception, traceback=r.traceback,
                           diagnoses=(Diagnosis("exception", t("code.exception", exception=r.exception or "")),))
    outputs = kata.outputs_of(case)
    want = len(outputs)
    if len(r.outputs) != want:
        names = ", ".join(o.name for o in outputs)
        return CaseVerdict(case, False, "count", diagnoses=(Diagnosis("count", t(
            "code.output_count", n=want, names=names, found=len(r.outputs))),))
    got = tuple(_array(o) for o in r.outputs)
    for spec, sent, a in zip(outputs, r.outputs, got, strict=True):
        if a is None:
            shape = _shape_text(spec.axes, case.sizes)
            said = _not_real(spec.name, sent, case, flavour, shape) or Diagnosis("type", t(
                "code.output_type", name=spec.name, found=sent.get("type", sent.get("dtype", "?")), shape=shape))
            return CaseVerdict(case, False, "type", output=spec.name, got=got, diagnoses=(said,))
    for spec, want_a, a in zip(outputs, case.expected, got, strict=True):
        assert a is not None
        if a.shape != want_a.shape:
            return CaseVerdict(case, False, "shape", output=spec.name, got=got, peak=r.peak)
    for spec, want_a, a in zip(outputs, case.expected, got, strict=True):
        assert a is not None
        wrong, n = _wrong_entries(want_a, a, case.dtype)
        if n:
            return CaseVerdict(case, False, "values", output=spec.name, wrong=tuple(wrong), n_wrong=n, got=got,
                               peak=r.peak)
    wrong_dtype = _wrong_dtype(kata, case, r.outputs, flavour)
    if wrong_dtype is not None:  # the right values in another dtype than the contract's
        return CaseVerdict(case, False, "dtype", got=got, peak=r.peak, diagnoses=(wrong_dtype,))
    if case.memory_limit is not None and r.peak is not None and r.peak > case.memory_limit:
        full = case.sizes.get("B", 1) * case.sizes.get("H", 1) * case.sizes["L_q"] * case.sizes["L_k"]
        full *= 4 if case.dtype == "float32" else 8
        return CaseVerdict(case, False, "memory", got=got, peak=r.peak, diagnoses=(Diagnosis("memory", t(
            "code.memory", peak=_mib(r.peak), full=_mib(full))),))
    return CaseVerdict(case, True, got=got, peak=r.peak)


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def _shape_text(axes: Sequence[str], sizes: Mapping[str, int]) -> str:
    return "[" + ", ".join(axes) + "] = [" + ", ".join(str(sizes.get(a, "?")) for a in axes) + "]"


def _named(kata: Kata, v: CaseVerdict, passed: Mapping[str, bool], only: set[str] | None = None,
           passing: Sequence[Case] = ()) -> CaseVerdict:
    found = diagnose(kata, v.case, tuple(a for a in v.got if a is not None), passed, only=only,
                     pairs=_size(v.case) <= LARGE, ruled_out_by=passing)
    if v.problem == "shape":
        outputs = kata.outputs_of(v.case)
        spec = next(o for o in outputs if o.name == v.output)
        i = [o.name for o in outputs].index(spec.name)
        got = v.got[i]
        assert got is not None
        expected = v.case.expected[i].shape
        lines = explain_shape(spec.axes, expected, got.shape, v.case.sizes, (), spec.name)[1:]
        shape = Diagnosis("shape", join_sentences([t("code.shape", name=spec.name, found=list(got.shape),
                                                     expected=_shape_text(spec.axes, v.case.sizes)), *lines]))
        return _with(v, (*found, shape))
    if not found:
        index, want, got_v = v.wrong[0]
        found = (Diagnosis("unknown", t("code.unknown", name=v.output, index=list(index), expected=_num(want),
                                        found=_num(got_v), n=v.n_wrong)),)
    return _with(v, found)


def _with(v: CaseVerdict, diagnoses: tuple[Diagnosis, ...]) -> CaseVerdict:
    from dataclasses import replace

    return replace(v, diagnoses=diagnoses)


def _num(x: float) -> str:
    return "nan" if np.isnan(x) else f"{x:.6g}"


def _message(m: Mistake) -> str:
    return t(f"code.mistake.{m.key}", **m.fields)


def diagnose(kata: Kata, case: Case, got: tuple[Array, ...], passed: Mapping[str, bool], *,
             only: set[str] | None = None, pairs: bool = True,
             ruled_out_by: Sequence[Case] = ()) -> tuple[Diagnosis, ...]:
    """The catalogued mistakes whose outputs on ``case`` are ``got`` (and not the right ones), each key
    once; two at once when no single one matches (``pairs``); ``()`` when none does.  ``only``: the keys
    tried first (a large case asks those its small cases showed; all of them when none matches).
    ``ruled_out_by``: cases the code got right; a mistake (or pair) that would have changed the outputs
    of one of them is not offered (the code that passed them does not make it)."""
    if only:
        found = _diagnose(kata, case, got, passed, [m for m in kata.mistakes if m.key in only], pairs=False,
                          ruled_out_by=ruled_out_by)
        if found:
            return found
    return _diagnose(kata, case, got, passed, list(kata.mistakes), pairs=pairs, ruled_out_by=ruled_out_by)


def _ruled_out(kata: Kata, slips: frozenset[str], passing: Sequence[Case]) -> bool:
    """Whether ``slips`` would have changed a case the code got right: then the code does not make them."""
    for c in passing:
        outs = kata.reference(c.inputs, slips)
        if outs is None or len(outs) != len(c.expected):
            continue
        if not all(_close(o, r, c.dtype) for o, r in zip(outs, c.expected, strict=True)):
            return True
    return False


def _diagnose(kata: Kata, case: Case, got: tuple[Array, ...], passed: Mapping[str, bool], mistakes: list[Mistake],
              *, pairs: bool, ruled_out_by: Sequence[Case] = ()) -> tuple[Diagnosis, ...]:
    right = case.expected
    found: list[Mistake] = []
    slipped: list[Mistake] = []
    for m in mistakes:
        if m.judge is not None:
            if m.judge(case, got, passed):
                found.append(m)
            continue
        slipped.append(m)
        if _gives(kata, case, m.slips, got, right) and not _ruled_out(kata, m.slips, ruled_out_by):
            found.append(m)
    if found:
        return tuple(Diagnosis(m.key, _message(m)) for m in {m.key: m for m in found}.values())
    if not pairs:
        return ()
    two = [(a, b) for a, b in combinations(slipped, 2) if a.key != b.key
           and _gives(kata, case, a.slips | b.slips, got, right)
           and not _ruled_out(kata, a.slips | b.slips, ruled_out_by)]
    return tuple(Diagnosis(f"{a.key}+{b.key}", t("code.two_mistakes", first=_message(a), second=_message(b)))
                 for a, b in two[:2])


def _gives(kata: Kata, case: Case, slips: frozenset[str], got: tuple[Array, ...], right: tuple[Array, ...]) -> bool:
    outs = kata.reference(case.inputs, slips)
    if outs is None or len(outs) != len(got):
        return False
    if all(_close(o, r, case.dtype) for o, r in zip(outs, right, strict=True)):
        return False  # the mistake changes nothing on this case
    return all(_same(o, g, case.dtype) for o, g in zip(outs, got, strict=True))
