"""The Chinese (zh-CN) catalogue: every key of :mod:`.en`, written from ``../shared/glossary-zh.md``."""

from __future__ import annotations

ZH: dict[str, str] = {}

#: The catalogue :mod:`tutor.base.messages` loads for ``zh``.
CATALOG = ZH
