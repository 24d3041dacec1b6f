"""`validate`, `new`, `schema` (issue 5)."""

from __future__ import annotations
