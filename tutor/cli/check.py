"""`check`: the errata auditor for written solutions (issue 4)."""

from __future__ import annotations
