"""`practice` and `stats` (issue 4)."""

from __future__ import annotations
