"""numpy, imported on first use: describing a step or a command never loads it.

The step catalogue (:mod:`tutor.steps`) keeps each kind's float functions
beside its exact ones, so its modules name numpy; ``attn-tutor list`` and
every ``--help`` describe steps and exercises without computing a float, and
must not pay for numpy's import.  A module writes::

    if TYPE_CHECKING:
        import numpy as np
    else:
        from ..base.lazy import numpy as np

and ``np.where(...)`` imports numpy the first time any function reaches it.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """A stand-in for the module ``name``, imported when an attribute of it is first read."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str) -> Any:  # only for names not copied in yet: the first use
        module: ModuleType = importlib.import_module(self._name)
        self.__dict__.update(vars(module))  # every later read is a plain attribute of this object
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


numpy = LazyModule("numpy")
