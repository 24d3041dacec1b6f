"""Writing a file the user named (``new -o``, ``explain --export``): the one way attn-tutor does it.

Every file attn-tutor writes on request goes through :func:`write_file`
(the progress store is created its own way: :mod:`tutor.store`):

* an existing path that is not a regular file -- a named pipe (FIFO), a
  device, a directory, a socket -- is refused, with or without ``--force``:
  writing into a FIFO waits for a reader (forever, with none), writing into
  a character device writes to the device;
* an existing regular file is replaced only with ``force``; without it the
  file is created with ``O_EXCL``, so a file that appears meanwhile is
  never overwritten either;
* nothing blocks: the file is opened with ``O_NONBLOCK`` (a FIFO that
  appears between the look and the open fails at once instead of waiting)
  and ``O_NOCTTY``, checked with ``fstat`` once open (the name may have
  changed since the look), and truncated only then.

:func:`check_target` is the same refusal before any work is done (``explain
--export`` computes the whole solution first).  Raises
:class:`tutor.base.errors.TutorError` (exit code 2) with one sentence naming the path.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import TutorError
from .messages import t

_KINDS = ((stat.S_ISDIR, "file.kind.directory"), (stat.S_ISFIFO, "file.kind.fifo"), (stat.S_ISSOCK, "file.kind.socket"),
          (stat.S_ISCHR, "file.kind.device"), (stat.S_ISBLK, "file.kind.device"))


#: The system errors attn-tutor says in words of its own (``os.errno.NAME``): the system's sentence
#: (``strerror``) is in the system's language, English, whatever the language of the run.
KNOWN_ERRNOS = ("ENOENT", "EACCES", "EPERM", "ELOOP", "EISDIR", "ENOTDIR", "ENAMETOOLONG", "EROFS", "EEXIST", "EIO",
                "EBUSY", "EMFILE", "ENFILE", "ENXIO", "ETXTBSY", "EINVAL", "ENOEXEC", "ENOMEM", "EFBIG", "EAGAIN")


def os_reason(err: BaseException) -> str:
    """Why a file could not be read or written, in the language of the run: a full disk (or a quota used
    up) said in words, which the system's "No space left on device" hides behind a device; a known error
    (:data:`KNOWN_ERRNOS`) by its key; any other the system's own sentence, quoted as a detail
    (``os.unlisted``).  ``err`` is an ``OSError`` (a ``ValueError`` from a name with a NUL character
    is said as ``os.unlisted`` too)."""
    import errno

    code = getattr(err, "errno", None)
    if code == errno.ENOSPC:
        return t("os.no_space")
    if code == getattr(errno, "EDQUOT", None):
        return t("os.quota")
    name = errno.errorcode.get(code) if isinstance(code, int) else None
    if name == "EWOULDBLOCK":  # the same number as EAGAIN where both exist
        name = "EAGAIN"
    if name in KNOWN_ERRNOS:
        return t(f"os.errno.{name}")
    return t("os.unlisted", detail=str(getattr(err, "strerror", None) or err))


def system_reason(text: str) -> str:
    """A system error known only by its sentence (a library's message ends in ``strerror``): said as
    :func:`os_reason` says the error whose ``strerror`` it is; else ``text`` itself, quoted as a detail."""
    import errno

    for name in KNOWN_ERRNOS + ("ENOSPC", "EDQUOT"):
        code = getattr(errno, name, None)
        if code is not None and os.strerror(code) == text:
            return os_reason(OSError(code, text))
    return t("os.unlisted", detail=text)


def file_kind(mode: int) -> str:
    """What a file that is not a regular one is, by its ``st_mode``: "a directory", "a named pipe (FIFO)" ..."""
    return t(next((key for test, key in _KINDS if test(mode)), "file.kind.special"))


def _refuse_special(path: Path, mode: int) -> None:
    if not stat.S_ISREG(mode):
        raise TutorError(t("output.not_file", path=path, kind=file_kind(mode)))


def check_target(path: Path, *, force: bool) -> None:
    """Refuse ``path`` as an output before anything is computed: an existing non-regular file
    (even with ``force``), an existing regular file without ``force``."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as err:  # a loop of links, a name too long, a folder that cannot be searched
        raise TutorError(t("new.unwritable", path=path, reason=os_reason(err))) from None
    _refuse_special(path, mode)
    if not force:
        raise TutorError(t("new.exists", path=path))


def write_file(path: Path, text: str | bytes, *, force: bool) -> None:
    """Write ``text`` (UTF-8; bytes as they are: a PDF) to ``path``: see the module docstring for what is refused and why.

    Raises :class:`TutorError` when ``path`` is refused or cannot be written (the system's reason).
    """
    check_target(path, force=force)
    flags = (os.O_WRONLY | os.O_CREAT | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
             | getattr(os, "O_BINARY", 0) | (0 if force else os.O_EXCL))
    try:
        fd = os.open(path, flags, 0o666)
    except FileExistsError:
        raise TutorError(t("new.exists", path=path)) from None
    except OSError as err:  # ENXIO: a FIFO without a reader appeared after the look
        raise TutorError(t("new.unwritable", path=path, reason=os_reason(err))) from None
    try:
        _refuse_special(path, os.fstat(fd).st_mode)
        os.ftruncate(fd, 0)
        with os.fdopen(fd, "wb", closefd=False) as f:
            f.write(text.encode("utf-8") if isinstance(text, str) else text)
    except OSError as err:  # ENOSPC: the disk is full
        raise TutorError(t("new.unwritable", path=path, reason=os_reason(err))) from None
    finally:
        os.close(fd)
