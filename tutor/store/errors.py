"""The store's failures, one class each, and the one place an SQLite error becomes a sentence."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ..errors import StoreError
from ..messages import t

__all__ = ["StoreDamagedError", "StoreError", "StoreFullError", "StoreLockedError", "error"]

# SQLite's primary result codes (https://sqlite.org/rescode.html) that call for their own sentence
_BUSY, _LOCKED, _READONLY, _CORRUPT, _FULL, _CANTOPEN, _NOTADB = 5, 6, 8, 11, 13, 14, 26


class StoreLockedError(StoreError):
    """The progress file stayed locked by another program for longer than the busy timeout."""

    def __init__(self, message: str, path: Path):
        super().__init__(message)
        self.path = path
        self.reason = t("store.busy", path=path)  # why an answer waits, as a clause


class StoreFullError(StoreError):
    """The disk holding the progress file is full (``SQLITE_FULL``); the write may succeed later."""

    def __init__(self, message: str, path: Path):
        super().__init__(message)
        self.path = path
        self.reason = t("store.full.reason", path=path)


class StoreDamagedError(StoreError):
    """The progress file is damaged (``SQLITE_CORRUPT``, ``SQLITE_NOTADB``, a failed
    ``quick_check``, a truncated file).  Nothing is written to it any more."""

    def __init__(self, message: str, path: Path, reason: str | None = None):
        super().__init__(message)
        self.path = path
        self.reason = reason or message


def error(path: Path, err: sqlite3.Error) -> StoreError:
    """One sentence for an SQLite failure on ``path``, chosen by SQLite's result code."""
    code = (getattr(err, "sqlite_errorcode", None) or 0) & 0xFF
    if code in (_BUSY, _LOCKED):
        return StoreLockedError(t("store.locked", path=path), path)
    if code in (_CORRUPT, _NOTADB):
        return StoreDamagedError(t("store.corrupt", path=path), path)
    if code == _FULL:
        return StoreFullError(t("store.full", path=path), path)
    if code == _READONLY:
        return StoreError(t("store.readonly", path=path, reason=str(err)))
    return StoreError(t("store.failed", path=path, reason=str(err)))
