"""PyTorch, the tests' oracle: one way for every test to get it.

torch is a test-only dependency.  Without it a test that needs it skips, unless
``ATTN_TUTOR_REQUIRE_TORCH=1`` (what ``.ci/run`` sets), where it fails naming how to install it: in CI a
parity test never passes by skipping.
"""

from __future__ import annotations

import os
from types import ModuleType

import pytest


def require_torch() -> ModuleType:
    """``import torch``; skip without it, but fail when ATTN_TUTOR_REQUIRE_TORCH=1."""
    if os.environ.get("ATTN_TUTOR_REQUIRE_TORCH") == "1":
        try:
            import torch
        except ImportError as exc:
            pytest.fail(
                f"ATTN_TUTOR_REQUIRE_TORCH=1 but torch cannot be imported ({exc}); "
                "install it with: .venv/bin/python -m pip install torch==2.13.0",
                pytrace=False,
            )
        return torch
    return pytest.importorskip("torch", reason="PyTorch parity tests need torch==2.13.0 (test-only)")
