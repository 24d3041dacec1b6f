"""The store's failures, one class each, and the one place an SQLite error becomes a sentence."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ..base.errors import StoreError
from ..base.messages import t

__all__ = ["StoreDamagedError", "StoreError", "StoreFullError", "StoreGoneError", "StoreLockedError", "error"]

# SQLite's primary result codes (https://sqlite.org/rescode.html) that call for their own sentence
_BUSY, _LOCKED, _READONLY, _CORRUPT, _FULL, _CANTOPEN, _NOTADB = 5, 6, 8, 11, 13, 14, 26
_READONLY_ROLLBACK = 776  # extended: a read-only connection met a hot journal it cannot roll back


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


class StoreGoneError(StoreDamagedError):
    """The progress file was deleted or replaced during a session, and what is at its path now cannot
    take the session's answers (a foreign or damaged file, a folder that cannot be written): nothing
    more is written by this session."""


def error(path: Path, err: sqlite3.Error, *, reading: bool = False) -> StoreError:
    """One sentence for an SQLite failure on ``path``, chosen by SQLite's result code.

    ``reading``: the failure came from a read (every check, ``stats``), so it is never worded
    as the file not being writable: SQLite's "attempt to write a readonly database" from a
    read-only connection means it could not undo a killed writer's unfinished write (a hot
    journal) or recover its log, and says so."""
    extended = getattr(err, "sqlite_errorcode", None) or 0
    code = extended & 0xFF
    if code in (_BUSY, _LOCKED):
        return StoreLockedError(t("store.locked", path=path), path)
    if code in (_CORRUPT, _NOTADB):
        return StoreDamagedError(t("store.corrupt", path=path), path)
    if code == _FULL:
        return StoreFullError(t("store.full", path=path), path)
    if extended == _READONLY_ROLLBACK:
        return StoreError(t("store.unfinished", path=path, reason=reason(err)))
    if code == _READONLY and reading:
        return StoreError(t("store.read_failed", path=path, reason=reason(err)))
    if code == _READONLY:
        return StoreError(t("store.readonly", path=path, reason=reason(err)))
    return StoreError(t("store.failed", path=path, reason=reason(err)))


#: SQLite's primary result codes said in words of attn-tutor's own (``store.sqlite.<code>``): SQLite's
#: sentence is English whatever the language of the run.
_SAID = {_READONLY: "readonly", 10: "ioerr", _CANTOPEN: "cantopen", 3: "perm", 7: "nomem"}


def reason(err: sqlite3.Error) -> str:
    """Why SQLite failed, in the language of the run: a result code of :data:`_SAID` by its key, any other
    SQLite's own sentence quoted as a detail (``os.unlisted``)."""
    code = (getattr(err, "sqlite_errorcode", None) or 0) & 0xFF
    return t(f"store.sqlite.{_SAID[code]}") if code in _SAID else t("os.unlisted", detail=str(err))
