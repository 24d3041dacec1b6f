"""Opening a progress file, checked: is it ours, intact, readable, writable?

Guarantees (the store's first line of defence; :mod:`.schema` says what
"ours" means):

* the file is ours only if its header carries
  :data:`~.schema.APPLICATION_ID` and a schema version this code knows
  (``PRAGMA application_id`` / ``PRAGMA user_version``), our tables are
  there, it holds no trigger (a trigger would run on every answer saved), and
  ``PRAGMA quick_check`` finds it intact.  Anything else -- a text file, a
  damaged or truncated database, another program's database, a newer schema
  -- is a :class:`~tutor.base.errors.StoreError` naming the file, and the file is
  never written to.  Only a missing file, or one with no schema object at all
  and no application id or version set, is initialised;
* the checks read the file through a read-only connection, so a file that is
  refused keeps every byte, and its ``-wal`` file too (a read-write
  connection would checkpoint another program's log into its file on close);
* a read-only open (``stats``, ``list``) works on a read-only folder or file
  system;
* a new store is created atomically: built complete, at the current schema
  version, in a hidden temporary file in the same folder, then given its name
  (:func:`create`), so a process killed while creating it leaves no half-made
  store;
* a write left unfinished by a killed process (a hot ``-journal``: a store
  made in place by an older attn-tutor, or another program's transaction)
  is undone before the checks, which read through read-only connections
  that cannot undo it: ``practice`` lets SQLite roll it back in place (a
  read-write open, as any SQLite program does; :func:`roll_back`), and
  says so truthfully when it cannot (a read-only folder); ``stats`` reads
  what was committed from a copy of the file and its journal
  (:func:`open_rolled_back_copy`), never writing the file;
* text SQLite holds that is not UTF-8 (another program wrote it) reads as
  U+FFFD (:func:`decode_text`), never an error.

Reading a file read-only (``mode=ro``).  A WAL database needs its ``-shm``
(and ``-wal``) file to be read; SQLite creates them when they are missing,
which a read-only folder refuses ("unable to open database file").  Then:

* with no ``-wal`` file holding frames, the file is opened ``immutable=1``:
  SQLite reads the database file alone, without locks.  Nothing is missed
  (there is no log to read) -- but SQLite also cannot see a writer that
  starts meanwhile; on a read-only file system there is none, and the answers
  are read in one go;
* with a ``-wal`` file holding frames (a session was killed, then the folder
  became read-only: a backup, a snapshot), ``immutable=1`` would silently
  leave out the answers in the log, so the database and its log are copied
  into a temporary folder and the copy is read.

The checks before a file is known to be ours also read a WAL-mode file
``immutable=1`` when it has no ``-wal`` frames, so that no ``-wal``/``-shm``
file is left next to a file that is refused.  Such a read could in theory
race a checkpoint of a session that starts and ends meanwhile; the file's
size and modification time are compared before and after, and the check is
repeated through SQLite's locks when they differ.
"""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path

from ..base.errors import StoreError
from ..base.messages import t
from ..base.outfile import os_reason
from .errors import _CANTOPEN, _CORRUPT, _NOTADB, StoreDamagedError, error, reason
from .schema import identity, initialise, verify

FILENAME = "progress.sqlite3"
BUSY_TIMEOUT_MS = 10_000
_MAGIC = b"SQLite format 3\x00"
_HEADER = 100  # bytes of the database header
_WAL_HEADER = 32  # bytes of a -wal file's header: a -wal no longer than this holds no frame
_WAL_PAGES = 8  # checkpoint the write-ahead log once it holds this many pages (SQLite's default: 1000)
_WAL_LIMIT = 64 * 1024  # and truncate it back to this many bytes when it restarts


def default_path(home: Path) -> Path:
    """Where the progress store lives in the data folder ``home`` (:meth:`tutor.base.env.Env.data_dir`):
    ``home / progress.sqlite3``."""
    return home / FILENAME


def decode_text(data: bytes) -> str:
    """A TEXT value as Python reads it: UTF-8, an invalid byte (another program wrote it) as U+FFFD,
    never an error (every connection's ``text_factory``)."""
    return data.decode("utf-8", "replace")


def file_id(path: Path) -> tuple[int, int] | None:
    """``(device, inode)`` of the file at ``path`` (links followed), ``None`` when there is none."""
    try:
        st = path.stat()
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


# --- a file, checked -------------------------------------------------------------------------


def _header(path: Path) -> bytes:
    """The first :data:`_HEADER` bytes of ``path`` (fewer when the file is shorter)."""
    try:
        with path.open("rb") as f:
            return f.read(_HEADER)
    except OSError as err:
        raise StoreError(t("store.unreadable", path=path, reason=os_reason(err))) from None


def check_header(path: Path) -> None:
    """Refuse, before SQLite touches it, a path that is not a file or a file that is not SQLite."""
    if not path.exists() and not path.is_symlink():
        return
    if not path.is_file():
        raise StoreError(t("store.not_file", path=path))
    head = _header(path)[:len(_MAGIC)]
    if head and head != _MAGIC:
        if head.strip(b"\x00") == b"" and journal_left(path):  # its first page never written: a killed creation
            raise StoreError(t("store.unfinished", path=path, reason=t("store.unfinished.header")))
        raise StoreError(t("store.foreign", path=path))


def _wal_frames(path: Path) -> bool:
    """Whether ``path``'s ``-wal`` file may hold committed pages (it exists and is longer than its header)."""
    try:
        return os.stat(f"{path}-wal").st_size > _WAL_HEADER
    except OSError:
        return False


def _fingerprint(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def _unchanged(path: Path, before: tuple[int, int, int] | None) -> bool:
    """No checkpoint wrote ``path`` and no writer began a log since ``before`` was taken."""
    return _fingerprint(path) == before and not _wal_frames(path)


def check_writable(path: Path) -> None:
    """Refuse before connecting when the file, or the folder its ``-wal``/``-shm`` files go in, cannot be written."""
    for target in (path, path.parent):
        if target.exists() and not os.access(target, os.W_OK):
            statvfs = getattr(os, "statvfs", None)
            read_only_fs = statvfs is not None and bool(statvfs(target).f_flag & getattr(os, "ST_RDONLY", 1))
            code = errno.EROFS if read_only_fs else errno.EACCES
            why = os_reason(OSError(code, os.strerror(code)))
            raise StoreError(t("store.readonly", path=path, reason=why))


def connect(path: Path, busy_timeout_ms: int) -> sqlite3.Connection:
    """A read-write connection (autocommit; transactions are explicit)."""
    try:
        conn = sqlite3.connect(str(path), timeout=busy_timeout_ms / 1000, isolation_level=None)
        conn.text_factory = decode_text
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        conn.execute("PRAGMA trusted_schema = OFF")  # views and triggers in the file may call no function with side effects
        # Keep the write-ahead log small: on a nearly full disk an ever-growing log (a copy of every page
        # written, until a checkpoint at 1000 pages) is what fills it, and cannot be checkpointed then.
        conn.execute(f"PRAGMA wal_autocheckpoint = {_WAL_PAGES}")
        conn.execute(f"PRAGMA journal_size_limit = {_WAL_LIMIT}")
    except sqlite3.Error as err:
        raise error(path, err) from None
    return conn


def connect_ro(path: Path, *, immutable: bool = False) -> sqlite3.Connection:
    """A read-only connection (``mode=ro``, optionally ``immutable=1``: see the module docstring),
    with the file opened: raises :class:`sqlite3.Error` (``SQLITE_CANTOPEN`` for a WAL file
    whose ``-shm`` cannot be created, ``SQLITE_CORRUPT`` ...) for the caller to word."""
    uri = path.absolute().as_uri() + ("?mode=ro&immutable=1" if immutable else "?mode=ro")
    conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    conn.text_factory = decode_text
    try:
        conn.execute("PRAGMA trusted_schema = OFF")
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchall()  # SQLite opens the file lazily: open it now
    except BaseException:
        conn.close()
        raise
    return conn


def _nothing() -> None:
    pass


def open_read(path: Path) -> tuple[sqlite3.Connection, Callable[[], None]]:
    """A read-only connection to ``path``, and what to do after closing it.

    ``mode=ro`` first; when SQLite cannot open it so (a WAL file in a
    read-only folder, without its ``-shm``), ``immutable=1`` if no ``-wal``
    file holds frames, else a copy of the file and its ``-wal`` in a
    temporary folder (removed by the returned callable)."""
    try:
        return connect_ro(path), _nothing
    except sqlite3.Error as err:
        if (getattr(err, "sqlite_errorcode", None) or 0) & 0xFF != _CANTOPEN:
            raise error(path, err, reading=True) from None
    if _wal_frames(path):
        return _open_copy(path)
    try:
        return connect_ro(path, immutable=True), _nothing
    except sqlite3.Error as err:
        raise error(path, err, reading=True) from None


def journal_left(path: Path) -> bool:
    """Whether a rollback journal (``-journal``) with content lies next to ``path``: a writer was
    killed mid-transaction (or is writing now).  SQLite undoes such a write on the next read-write
    open; a read-only connection cannot, and refuses the file ("attempt to write a readonly database")."""
    try:
        return os.stat(f"{path}-journal").st_size > 0
    except OSError:
        return False


def roll_back(path: Path) -> None:
    """Let SQLite undo the write a killed process left unfinished in ``path`` (its hot ``-journal``),
    through a read-write connection that reads one page and closes; the checks that follow are
    then made on what was committed.  (A journal of a writer still alive is not hot: SQLite waits
    for its lock instead.)  A file SQLite cannot read at all is left to those checks to name;
    one whose journal cannot be undone here (a read-only folder) is a :class:`StoreError` saying so."""
    try:
        conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    except sqlite3.Error as err:
        raise StoreError(t("store.unfinished", path=path, reason=reason(err))) from None
    try:
        conn.execute("PRAGMA trusted_schema = OFF")
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchall()
    except sqlite3.Error as err:
        code = (getattr(err, "sqlite_errorcode", None) or 0) & 0xFF
        if code not in (_CORRUPT, _NOTADB):
            raise StoreError(t("store.unfinished", path=path, reason=reason(err))) from None
    finally:
        conn.close()


def open_rolled_back_copy(path: Path) -> tuple[sqlite3.Connection, Callable[[], None]]:
    """Read what was committed to ``path`` when a ``-journal`` lies beside it, without writing it:
    the file and its journal are copied into a temporary folder, SQLite undoes the unfinished write
    in the copy, and the copy is read (``stats`` only reads, on a read-only file system too).
    Returns the read-only connection and what to do after closing it."""
    folder = Path(tempfile.mkdtemp(prefix="attn-tutor-"))

    def cleanup() -> None:
        shutil.rmtree(folder, ignore_errors=True)

    copy = folder / FILENAME
    try:
        shutil.copyfile(path, copy)
        shutil.copyfile(f"{path}-journal", f"{copy}-journal")
        roll_back(copy)
        if _header(copy)[:len(_MAGIC)] not in (_MAGIC, b""):
            raise StoreError(t("store.foreign", path=path))
        return connect_ro(copy), cleanup
    except OSError as err:
        cleanup()
        raise StoreError(t("store.unreadable", path=path, reason=os_reason(err))) from None
    except StoreError as err:
        cleanup()
        raise StoreError(str(err).replace(str(copy), str(path))) from None
    except sqlite3.Error as err:
        cleanup()
        raise error(path, err, reading=True) from None


def create(path: Path) -> None:
    """Create the store at ``path`` atomically: built complete (the current schema
    (:func:`.schema.initialise`), application id, version, WAL mode) in a temporary file in the
    same folder, written to disk, then given its name.

    A process killed while creating leaves at most a hidden temporary file, never a half-made
    store (a kill during an in-place creation left an uncommitted file and a hot journal that
    every later read-only check refused).  The name is taken with a hard link, so a store another
    session created meanwhile is never replaced; an empty file (``touch``) is replaced whole.
    A new file is at :data:`.schema.SCHEMA_VERSION`: it needs no migration.
    """
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".new", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        conn = sqlite3.connect(str(tmp), isolation_level=None)
        try:
            conn.execute("BEGIN")
            initialise(conn)
            conn.execute("COMMIT")
            conn.execute("PRAGMA journal_mode = WAL")
        finally:
            conn.close()
        with tmp.open("rb+") as f:
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            if path.stat().st_size == 0:
                os.replace(tmp, path)
        except OSError:  # a file system without hard links
            if not path.exists() or path.stat().st_size == 0:
                os.replace(tmp, path)
        _sync_folder(path.parent)
    except sqlite3.Error as err:
        raise error(path, err) from None
    except OSError as err:
        raise StoreError(t("store.readonly", path=path, reason=os_reason(err))) from None
    finally:
        for leftover in (tmp, Path(f"{tmp}-journal"), Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
            try:
                leftover.unlink()
            except OSError:
                pass


def _sync_folder(folder: Path) -> None:
    """Write a folder's entries to disk (a new name survives a power cut); a no-op where folders cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _open_copy(path: Path) -> tuple[sqlite3.Connection, Callable[[], None]]:
    """Read ``path`` and its ``-wal`` from a copy in a temporary folder (the original folder
    is read-only and SQLite cannot open the log there)."""
    folder = Path(tempfile.mkdtemp(prefix="attn-tutor-"))

    def cleanup() -> None:
        shutil.rmtree(folder, ignore_errors=True)

    copy = folder / FILENAME
    try:
        shutil.copyfile(path, copy)
        shutil.copyfile(f"{path}-wal", f"{copy}-wal")
        return connect_ro(copy), cleanup
    except OSError as err:
        cleanup()
        raise StoreError(t("store.unreadable", path=path, reason=os_reason(err))) from None
    except sqlite3.Error as err:
        cleanup()
        raise error(path, err, reading=True) from None


def judge(conn: sqlite3.Connection, path: Path, *, whole: bool) -> bool:
    """Whether the file behind ``conn`` is ours (True) or empty (False), checked with
    ``PRAGMA quick_check``; raises :class:`StoreError` otherwise.  ``whole``: the
    database file alone holds every page (no ``-wal`` frames), so its size must be
    a whole number of pages -- a shorter one was cut."""
    try:
        conn.execute("BEGIN")  # one snapshot for every check
        try:
            ours = verify(path, *identity(conn))
            (page,), = conn.execute("PRAGMA page_size").fetchall()
            problems = conn.execute("PRAGMA quick_check(1)").fetchall()
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
    except sqlite3.Error as err:
        raise error(path, err, reading=True) from None
    cut = whole and bool(page) and (_fingerprint(path) or (0, 0, 0))[1] % page != 0
    if problems != [("ok",)] or cut:
        if ours:
            raise StoreDamagedError(t("store.corrupt", path=path), path)
        raise StoreError(t("store.foreign", path=path))
    return ours


def inspect(path: Path) -> bool:
    """Check an existing, non-empty file before anything else opens it: ours (True),
    empty (False), else :class:`StoreError`.  Reads only.

    A WAL-mode file with no ``-wal`` frames is read ``immutable=1``, which
    creates no ``-wal``/``-shm`` file beside it.  Its size and modification
    time before and after, and the absence of ``-wal`` frames after, tell
    whether a writer began meanwhile (a checkpoint writes the file only after
    frames were written to the log); if so it is read again, in the end
    through SQLite's locks."""
    for _ in range(3):
        if _header(path)[18:19] != b"\x02" or _wal_frames(path):
            break
        before = _fingerprint(path)
        try:
            conn = connect_ro(path, immutable=True)
        except sqlite3.Error as err:
            if _unchanged(path, before):
                raise error(path, err, reading=True) from None
            continue
        try:
            verdict = judge(conn, path, whole=True)
        except StoreError:
            if _unchanged(path, before):
                raise
            continue
        finally:
            conn.close()
        if _unchanged(path, before):
            return verdict
    whole = not _wal_frames(path)
    conn, cleanup = open_read(path)
    try:
        return judge(conn, path, whole=whole)
    finally:
        conn.close()
        cleanup()
