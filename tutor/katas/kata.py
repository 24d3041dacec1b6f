"""What a kata is: its names, its outputs, its cases, its reference with the mistakes, its follow-ups.

A kata asks the learner to write one piece of attention as code (the seed's
multi-head module, SDPA, the masks, cross-attention, grouped K/V heads, a
KV-cache decode step, the online softmax, the backward pass).  It is data plus
one function: :attr:`Kata.reference` computes the kata's outputs from a case's
inputs in float64 NumPy, the right way when ``slips`` is empty and the way a
learner holding each catalogued mistake would when it names them (``{"no_scaling"}``);
:mod:`.judge` names a learner's mistake by finding the slips whose outputs
match theirs.  A case (:class:`Case`) holds its inputs by name, the arguments
each flavour's call takes, and its expected outputs (from the exact engine for
a hand-sized case, from the reference otherwise).

Pure data and NumPy: no I/O, no child process (that is :mod:`.run`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["Array", "Case", "Kata", "Mistake", "Output", "Phrase", "Reference", "encode", "phrase"]

Array = NDArray[Any]
#: ``reference(inputs, slips) -> outputs`` (float64, in the kata's output order), or ``None`` when the
#: slips cannot run on these inputs (``K·Qᵀ`` when ``L_q ≠ L_k``: the learner's code would raise).
Reference = Callable[[Mapping[str, Any], frozenset[str]], "tuple[Array, ...] | None"]


@dataclass(frozen=True)
class Output:
    """One returned value: its name (``out``, ``weights``) and its axes by name (``B``, ``H``, ``L_q``, ``L_k``)."""

    name: str
    axes: tuple[str, ...]


@dataclass(frozen=True)
class Mistake:
    """A catalogued mistake as code makes it: a key (shared with :mod:`tutor.mistakes.diagnose` where the
    mistake is the same), the slips the reference turns for it, and the message's fields.

    The message is ``t(f"code.mistake.{key}", **fields)``: what the code did and what to change, in the
    learner's terms (a line of code where it helps).  ``judge``: a mistake with no one value (dropout
    left on) is recognised by a function ``(case, outputs, passed) -> bool`` instead of a slip.
    """

    key: str
    slips: frozenset[str] = frozenset()
    fields: Mapping[str, Any] = field(default_factory=dict)
    judge: Callable[[Case, tuple[Array, ...], Mapping[str, bool]], bool] | None = None

    @staticmethod
    def of(key: str, *slips: str, **fields: Any) -> Mistake:
        return Mistake(key, frozenset(slips or (key,)), fields)


@dataclass(frozen=True)
class Phrase:
    """A ``given`` item of a case in words: the catalogue's ``code.given.<key>`` with ``fields`` (a shape, a
    size), shown in the language of the run.  Notation needs none (``float32``, ``L_q ≠ L_k``): a plain ``str``."""

    key: str
    fields: Mapping[str, Any] = field(default_factory=dict)


def phrase(key: str, **fields: Any) -> Phrase:
    """The ``given`` item ``code.given.<key>`` (``phrase("mask_shape", shape="[L_q, L_k]")``)."""
    return Phrase(key, fields)


@dataclass(frozen=True)
class Case:
    """One case: what the learner's code is given and what it must return.

    ``inputs`` by name (float64 arrays, bool masks, ints); ``dtype`` the float dtype the
    learner's code is called with (``float32`` or ``float64``); ``args``/``kwargs`` the
    function flavour's call, ``init``/``load``/``module_args``/``module_kwargs`` the class
    flavour's (for a kata whose PyTorch flavour is a module); ``sizes`` the sizes by axis name,
    ``given`` what is special about the case (a causal mask, key padding, a fully masked row): each
    item words (a :class:`Phrase`, a catalogue key), notation (``is_causal=True``, ``L_q = 3, L_k = 5``)
    or ``exercise:ID`` (the bundled exercise the numbers come from); ``expected`` the right outputs; ``hand``: expected from the exact engine;
    ``only``: the one flavour this case is for (a dropout probability only a module takes);
    ``trace_memory``: the case measures the most memory NumPy allocates (the online softmax);
    ``memory_limit``: then the bytes the learner's NumPy code may allocate at most (the online
    softmax's: a quarter of one ``[L_q, L_k]`` matrix of the case's dtype, ``sizes`` ``L_q``, ``L_k``).
    """

    id: str
    inputs: Mapping[str, Any]
    dtype: str
    sizes: Mapping[str, int]
    expected: tuple[Array, ...]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    init: tuple[Any, ...] = ()
    load: Mapping[str, Any] = field(default_factory=dict)
    module_args: tuple[Any, ...] = ()
    module_kwargs: Mapping[str, Any] = field(default_factory=dict)
    given: tuple[str | Phrase, ...] = ()
    hand: bool = False
    only: str | None = None
    trace_memory: bool = False
    memory_limit: int | None = None  # bytes, with trace_memory
    twin: str | None = None  # the case with the same numbers and no dropout (a dropout case's)
    #: A kata of several functions (``rope``): the function this case calls (``None``: the kata's) and what
    #: it returns (``None``: the kata's :attr:`Kata.outputs`).
    call: str | None = None
    outputs: tuple[Output, ...] | None = None

    def request(self) -> dict[str, Any]:
        """The case as the harness reads it (arrays as ``{"dtype", "shape", "data"}``)."""
        return {
            "id": self.id, "dtype": self.dtype, "only": self.only, "trace_memory": self.trace_memory,
            "call": self.call,
            "args": [encode(a, self.dtype) for a in self.args],
            "kwargs": {k: encode(v, self.dtype) for k, v in self.kwargs.items()},
            "init": list(self.init), "load": {k: encode(v, self.dtype) for k, v in self.load.items()},
            "module_args": [encode(a, self.dtype) for a in self.module_args],
            "module_kwargs": {k: encode(v, self.dtype) for k, v in self.module_kwargs.items()},
        }


def encode(value: Any, dtype: str) -> Any:
    """An argument as the harness reads it: a float array in the case's dtype, a bool or int array as it is."""
    if isinstance(value, np.ndarray):
        kind = "bool" if value.dtype == np.bool_ else "int64" if value.dtype.kind in "iu" else dtype
        return {"dtype": kind, "shape": list(value.shape), "data": value.astype(kind).tolist()}
    if isinstance(value, np.generic):
        return value.item()
    return value


@dataclass(frozen=True)
class Kata:
    """A kata: ``id`` (``mha``), the function (NumPy flavour) and the class or function (PyTorch flavour) the
    learner's file defines, the outputs in order, the cases, the reference, the mistakes it names,
    and ``follow_ups``: concept ids of the bank an interviewer asks next."""

    id: str
    numpy_name: str
    torch_name: str
    outputs: tuple[Output, ...]
    reference: Reference
    cases: Callable[[], tuple[Case, ...]]
    mistakes: tuple[Mistake, ...]
    follow_ups: tuple[str, ...] = ()
    by_hand: bool = False  # PyTorch's autograd is switched off in the learner's program (the backward pass)
    #: The functions whose contract says their result has an argument's dtype, and that argument
    #: (``{"apply_rope": "x"}``): a result of the right values in another float dtype fails, named.
    dtype_of: Mapping[str, str] = field(default_factory=dict)

    def outputs_of(self, case: Case) -> tuple[Output, ...]:
        """What ``case``'s call returns: the case's own outputs (a kata of several functions), else the kata's."""
        return case.outputs if case.outputs is not None else self.outputs

    def request(self) -> dict[str, Any]:
        return {"kata": self.id, "numpy_name": self.numpy_name, "torch_name": self.torch_name,
                "no_autograd": self.by_hand}
