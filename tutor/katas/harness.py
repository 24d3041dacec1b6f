"""The program ``attn-tutor code check`` runs in a child process: it loads the learner's file and calls it.

This file is run as a script by the learner's own interpreter (``--python``),
which may have neither attn-tutor nor NumPy installed (a PyTorch learner's
interpreter need not have NumPy), so it imports nothing but the standard
library, and NumPy or PyTorch only for the flavour the learner's file is in.
It is the one place attn-tutor runs code: the file named on the command line,
as the learner's own program, under the limits :mod:`tutor.katas.run` set.

``python harness.py REQUEST EVENTS_FD``: ``REQUEST`` is a JSON file (the
file, the names of the kata's function and class, the cases, and ``messages``:
the sentences this program says itself, in the language of the run, since it
cannot read attn-tutor's catalogue; :data:`MESSAGES` the English ones, for a
request without them); every event is
one JSON line written to the pipe ``EVENTS_FD``, so that nothing the learner
prints can be read as one:

* ``{"event": "syntax", "line", "col", "text", "message"}``: the file is not Python;
* ``{"event": "load_error", "traceback", "exception"}``: it raised while it was imported;
* ``{"event": "missing", "wanted", "defined"}``: it defines none of the names;
* ``{"event": "loaded", "flavour", "why", "cases"}``: it is in this flavour (``numpy`` or ``torch``), why, and
  how many cases it will run (those for its flavour);
* ``{"event": "start", "id"}``, then ``{"event": "result", "id", "outputs", "peak"}``
  or ``{"event": "error", "id", "traceback", "exception"}``: one case.

An array crosses as ``{"dtype", "shape", "data"}`` (``data`` nested lists;
JSON's ``NaN`` and ``Infinity`` for those floats); an array of anything but
booleans, integers and real floats (complex numbers, objects, strings) as
``{"type", "repr", "array_dtype", "shape"}`` without its entries, which JSON
cannot carry; any other returned value as ``{"type", "repr"}``.  The flavour: the class (PyTorch) or the function (NumPy)
the request names; when both flavours are a function, a file that imports
``torch`` at its top level is in the PyTorch flavour, and a module-level
``FLAVOUR = "numpy"`` or ``"torch"`` says it outright, as ``--flavour`` does (the request's ``flavour``).
A kata of several functions (``rope``) names the one a case calls in the case's ``call``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import traceback
import tracemalloc
from typing import Any

MAX_ELEMENTS = 1_000_000  # the largest returned array sent back (a kata's outputs are small)
REPR_CHARS = 200
#: What this program says itself, by name (``code.harness.<name>`` in attn-tutor's catalogue, which
#: :mod:`tutor.katas.check` sends in the request's ``messages``): English when the request has none.
MESSAGES = {
    "autograd_off": "this kata asks for the gradients by hand: autograd (.backward(), torch.autograd.grad) "
                    "is switched off here",
    "not_python": "not a Python file",
}


def _said(request: dict[str, Any], name: str) -> str:
    """The sentence ``name`` in the language of the run (the request's ``messages``), else in English."""
    said = request.get("messages", {}).get(name)
    return said if isinstance(said, str) else MESSAGES[name]


def _send(out: Any, event: dict[str, Any]) -> None:
    out.write(json.dumps(event) + "\n")
    out.flush()


def _theirs(tb: Any, folder: str) -> str:
    """The traceback's frames in the learner's own files (those in their file's folder, not a library's)."""
    frames = [f for f in traceback.extract_tb(tb)
              if not f.filename.startswith("<") and os.path.dirname(os.path.realpath(f.filename)) == folder]
    return "".join(traceback.format_list(frames))


def _exception_line(exc: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


def _to_array(spec: Any, flavour: str) -> Any:
    """A request's value as the flavour's array (``{"dtype", "data"}``), or as it is (numbers, None, lists)."""
    if isinstance(spec, dict) and "dtype" in spec:
        if flavour == "torch":
            import torch

            return torch.tensor(spec["data"], dtype=getattr(torch, spec["dtype"])).reshape(spec["shape"])
        import numpy as np

        return np.array(spec["data"], dtype=spec["dtype"]).reshape(spec["shape"])
    if isinstance(spec, list):
        return [_to_array(s, flavour) for s in spec]
    return spec


def _from_value(value: Any) -> dict[str, Any]:
    """A returned value as it crosses back: an array's dtype, shape and entries; anything else's type and repr."""
    kind = type(value).__module__.split(".")[0]
    if kind == "torch" and hasattr(value, "detach"):
        value = value.detach().cpu()
        dtype = str(value.dtype).removeprefix("torch.")
        shape = list(value.shape)
        if value.is_complex() or not (value.is_floating_point() or dtype == "bool" or "int" in dtype):
            return {"type": "tensor", "repr": f"a tensor of {dtype}", "array_dtype": dtype, "shape": shape}
        if value.numel() > MAX_ELEMENTS:
            return {"type": "tensor", "repr": f"a tensor of shape {shape} (too large to check)"}
        return {"dtype": dtype, "shape": shape, "data": value.tolist()}
    if kind == "numpy" and hasattr(value, "dtype") and hasattr(value, "shape"):
        shape = list(value.shape)
        if getattr(value.dtype, "kind", "") not in ("b", "i", "u", "f"):  # complex, object, str, datetime …
            return {"type": "ndarray", "repr": f"an array of {value.dtype}", "array_dtype": str(value.dtype),
                    "shape": shape}
        if value.size > MAX_ELEMENTS:
            return {"type": "ndarray", "repr": f"an array of shape {shape} (too large to check)"}
        return {"dtype": str(value.dtype), "shape": shape, "data": value.tolist()}
    text = repr(value)
    return {"type": type(value).__name__, "repr": text[:REPR_CHARS]}


def _outputs(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, (tuple, list)):
        return [_from_value(v) for v in value]
    return [_from_value(value)]


def _flavour(module: Any, request: dict[str, Any]) -> tuple[str, str] | None:
    """The file's flavour and why (see the module docstring); None when it defines neither name.

    Why: ``option`` (``--flavour``), ``FLAVOUR`` (the file says so), ``class`` / ``function`` (what
    it defines), ``imports torch`` / ``no torch`` (a function kata: whether torch is imported)."""
    numpy_name, torch_name = request["numpy_name"], request["torch_name"]
    has_numpy, has_torch = callable(getattr(module, numpy_name, None)), callable(getattr(module, torch_name, None))
    if not (has_numpy or has_torch):
        return None
    for told, why in ((request.get("flavour"), "option"), (getattr(module, "FLAVOUR", None), "FLAVOUR")):
        if told in ("numpy", "torch") and (has_torch if told == "torch" else has_numpy):
            return str(told), why
    if numpy_name != torch_name:  # a class for PyTorch, a function for NumPy
        return ("torch", "class") if has_torch else ("numpy", "function")
    imported = getattr(module, "torch", None)
    return ("torch", "imports torch") if getattr(imported, "__name__", None) == "torch" else ("numpy", "no torch")


def _call(module: Any, flavour: str, request: dict[str, Any], case: dict[str, Any]) -> Any:
    as_module = flavour == "torch" and request["numpy_name"] != request["torch_name"]
    args = [_to_array(a, flavour) for a in case["module_args" if as_module else "args"]]
    kwargs = {k: _to_array(v, flavour) for k, v in case["module_kwargs" if as_module else "kwargs"].items()}
    called = case.get("call")  # a kata of several functions: the one this case calls
    if flavour == "numpy":
        return getattr(module, called or request["numpy_name"])(*args, **kwargs)
    import torch

    with torch.no_grad():
        if not as_module:
            return getattr(module, called or request["torch_name"])(*args, **kwargs)
        layer = getattr(module, request["torch_name"])(*case["init"]).to(getattr(torch, case["dtype"]))
        for name, spec in case.get("load", {}).items():
            target = layer.get_parameter(name)
            target.copy_(_to_array(spec, "torch").to(target.dtype))
        return layer.eval()(*args, **kwargs)


def _autograd_off(message: str) -> None:
    """A kata done by hand (the backward pass): PyTorch's autograd raises, saying so (``message``)."""
    import torch

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(message)

    torch.Tensor.backward = refuse  # type: ignore[method-assign]
    torch.autograd.backward = refuse
    torch.autograd.grad = refuse


def main(argv: list[str]) -> int:
    request_path, fd = argv[1], int(argv[2])
    out = os.fdopen(fd, "w", encoding="utf-8")
    with open(request_path, encoding="utf-8") as f:
        request = json.load(f)
    path = os.path.realpath(request["file"])
    folder = os.path.dirname(path)
    sys.path.insert(0, folder)  # the learner's file may import a module of theirs beside it
    sys.argv = [path]
    spec = importlib.util.spec_from_file_location("learner_solution", path)
    if spec is None or spec.loader is None:
        _send(out, {"event": "load_error", "traceback": "", "exception": _said(request, "not_python")})
        return 0
    module = importlib.util.module_from_spec(spec)
    sys.modules["learner_solution"] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        _send(out, {"event": "syntax", "line": exc.lineno, "col": exc.offset, "text": (exc.text or "").rstrip("\n"),
                    "message": exc.msg})
        return 0
    except BaseException as exc:  # noqa: BLE001 -- the learner's program raised while it was imported
        _send(out, {"event": "load_error", "traceback": _theirs(exc.__traceback__, folder),
                    "exception": _exception_line(exc)})
        return 0
    found = _flavour(module, request)
    if found is None:
        defined = sorted(n for n in vars(module) if not n.startswith("_") and callable(vars(module)[n]))
        _send(out, {"event": "missing", "wanted": [request["numpy_name"], request["torch_name"]],
                    "defined": defined[:20]})
        return 0
    flavour, why = found
    cases = [c for c in request["cases"] if c.get("only") in (None, flavour)]
    _send(out, {"event": "loaded", "flavour": flavour, "why": why, "cases": len(cases)})
    if flavour == "torch" and request.get("no_autograd"):
        _autograd_off(_said(request, "autograd_off"))
    for case in cases:
        _send(out, {"event": "start", "id": case["id"]})
        peak = None
        try:
            if case.get("trace_memory") and flavour == "numpy":
                tracemalloc.start()
                value = _call(module, flavour, request, case)
                peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
            else:
                value = _call(module, flavour, request, case)
            outputs = _outputs(value)
        except BaseException as exc:  # noqa: BLE001 -- the learner's code raised: their traceback, not ours
            if tracemalloc.is_tracing():
                tracemalloc.stop()
            _send(out, {"event": "error", "id": case["id"], "traceback": _theirs(exc.__traceback__, folder),
                        "exception": _exception_line(exc)})
            continue
        # Sent outside the try: this program's own failure to write a result is not the learner's exception.
        _send(out, {"event": "result", "id": case["id"], "outputs": outputs, "peak": peak})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
