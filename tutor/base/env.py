"""The one environment object: everything attn-tutor takes from its process, read once.

:class:`Env` holds the language, the folder of the progress store, the
exercise packs, the widths and colour settings of the consoles, the debug
switch and the three standard streams.  :meth:`Env.from_process` reads them
from ``os.environ`` and ``sys.stdin``/``sys.stdout``/``sys.stderr``, and is
the only place in the package that reads an environment variable;
:func:`tutor.cli.main` calls it once per run (unless it is given an Env) and
passes the Env down: the library takes what it needs as parameters.  Tests
build their own (:meth:`Env.from_environ` with a mapping of their own, or
``Env(...)``) instead of changing the process's environment.

The variables read (:data:`VARIABLES`): ``ATTN_TUTOR_LANG``, else the locale
(``LC_ALL``, ``LC_MESSAGES``, ``LANG``: :func:`language_from`) (the message
catalogue), ``ATTN_TUTOR_HOME`` (the progress store's folder),
``ATTN_TUTOR_PATH`` (exercise packs, separated by :data:`os.pathsep`),
``ATTN_TUTOR_DEBUG`` (tracebacks of internal errors), ``COLUMNS`` and
``TERMINAL_WIDTH`` (widths, clamped to :data:`MIN_WIDTH` ..
:data:`MAX_WIDTH`), ``NO_COLOR``, ``FORCE_COLOR`` and ``TTY_COMPATIBLE``
(colour, as rich reads them).  A console also gets the whole mapping
(:attr:`Env.environ`, the widths clamped) for what rich reads itself
(``TERM``, ``COLORTERM``, ``LINES``), so that it reads the Env's variables
and never the process's.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TextIO

from .errors import TutorError
from .messages import CATALOGS, LANGUAGES, t

#: The narrowest width any console is laid out at (``COLUMNS=0`` or a tiny terminal is
#: clamped to it): the layouts are made and tested for it.
MIN_WIDTH = 20
#: The widest: a larger ``COLUMNS`` (or terminal) is clamped to it.  Some lines are as wide as the
#: console (rules, padded cells), so ``COLUMNS=1000000`` wrote 23 MB and ``COLUMNS=99999999`` ran
#: for minutes; 500 columns is wider than any terminal on a large screen.
MAX_WIDTH = 500

#: The variables attn-tutor itself reads.
VARIABLES = ("ATTN_TUTOR_LANG", "LC_ALL", "LC_MESSAGES", "LANG", "ATTN_TUTOR_HOME", "ATTN_TUTOR_PATH", "ATTN_TUTOR_DEBUG", "COLUMNS", "TERMINAL_WIDTH",
             "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE")


@dataclass(frozen=True)
class Env:
    """Everything attn-tutor takes from its process, for one run.

    - ``home``: the folder of the progress store, ``ATTN_TUTOR_HOME``
      (``~`` expanded); ``None`` when it is not set: then
      :meth:`data_dir` is the platform's user data folder.
    - ``language``: the message catalogue in use (a key of
      :data:`tutor.base.messages.CATALOGS`); :func:`tutor.cli.main` speaks it
      for the run (:func:`tutor.base.messages.use_language`).
    - ``packs``: the exercise folders of ``ATTN_TUTOR_PATH``, in order,
      searched after those given with ``--exercises``.
    - ``width``: the width every console is laid out at (``COLUMNS``, within
      :data:`MIN_WIDTH` .. :data:`MAX_WIDTH`); ``None``: the terminal's, as rich
      measures it (a console clamps it).
    - ``help_width``: the width of typer's help (``TERMINAL_WIDTH``, clamped);
      ``None``: ``width``.
    - ``no_color``: colour is off (``NO_COLOR`` set and not empty; styles
      such as bold stay).
    - ``force_terminal``: whether a console treats its stream as a terminal
      whatever the stream says (``TTY_COMPATIBLE=1``/``0``, else
      ``FORCE_COLOR``: empty means no); ``None``: ask the stream.
    - ``debug``: an internal error prints its traceback (``ATTN_TUTOR_DEBUG``).
    - ``stdin``, ``stdout``, ``stderr``: the standard streams; ``None`` is a
      closed one (``<&-``, ``>&-``).
    - ``environ``: the variables it was read from (read-only), ``COLUMNS``
      and ``TERMINAL_WIDTH`` as clamped (``width``, ``help_width``), handed to
      rich (its ``_environ``) for what it reads itself (rich reads ``COLUMNS``
      again when it measures a console, and ``int()`` refuses a 5,000-digit
      one), and the environment of the learner's program that ``code check`` runs; nothing else
      reads it.

    Raises ``ValueError`` for a language that has no catalogue.
    """

    home: Path | None
    language: str = "en"
    packs: tuple[Path, ...] = ()
    width: int | None = None
    help_width: int | None = None
    no_color: bool = False
    force_terminal: bool | None = None
    debug: bool = False
    stdin: TextIO | None = None
    stdout: TextIO | None = None
    stderr: TextIO | None = None
    environ: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), repr=False)

    def __post_init__(self) -> None:
        if self.language not in CATALOGS:
            raise ValueError(f"no message catalogue for language {self.language!r} (known: {', '.join(CATALOGS)})")

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], *, stdin: TextIO | None, stdout: TextIO | None,
                     stderr: TextIO | None, terminal_width: int = 0, language: str | None = None) -> Env:
        """The Env that the variables ``environ`` describe, with these streams.

        ``language`` (``--lang``) is spoken instead of the one ``environ`` asks for.

        ``terminal_width`` is the terminal's width in columns (0: no
        terminal); it matters only without ``COLUMNS``, where a terminal
        wider than :data:`MAX_WIDTH` makes ``width`` that maximum.  The
        language is :func:`language_from`'s; a ``COLUMNS`` that is not a
        number is left to rich (which ignores it, as it always did).

        Raises :class:`UnknownLanguage` for an ``ATTN_TUTOR_LANG`` attn-tutor does not speak.
        """
        home = environ.get("ATTN_TUTOR_HOME")
        lang = language or language_from(environ)
        width = clamp_width(environ.get("COLUMNS"))
        if width is None and environ.get("COLUMNS") is None and terminal_width > MAX_WIDTH:
            width = MAX_WIDTH
        help_width = clamp_width(environ.get("TERMINAL_WIDTH"))
        clamped = {name: str(value) for name, value in (("COLUMNS", width), ("TERMINAL_WIDTH", help_width))
                   if value is not None}
        variables = MappingProxyType({**environ, **clamped})
        return cls(
            home=Path(home).expanduser() if home else None,
            language=lang,
            packs=pack_folders(environ.get("ATTN_TUTOR_PATH", "")),
            width=width,
            help_width=help_width,
            no_color=variables.get("NO_COLOR", "") != "",
            force_terminal=_force_terminal(variables),
            debug=bool(variables.get("ATTN_TUTOR_DEBUG")),
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            environ=variables,
        )

    @classmethod
    def from_process(cls, language: str | None = None) -> Env:
        """This process's Env: ``os.environ``, ``sys.stdin``/``sys.stdout``/``sys.stderr`` and the
        terminal's width; ``language`` as :meth:`from_environ` says.  The one place attn-tutor reads
        its environment.  Raises :class:`UnknownLanguage` as :meth:`from_environ` does."""
        return cls.from_environ(os.environ, stdin=sys.stdin, stdout=sys.stdout, stderr=sys.stderr,
                                terminal_width=_terminal_width(), language=language)

    def data_dir(self) -> Path:
        """The folder of attn-tutor's data (the progress store): ``home``, else the platform's user
        data folder (platformdirs, imported only here: ``--help`` does not pay for it)."""
        if self.home is not None:
            return self.home
        import platformdirs

        return Path(platformdirs.user_data_dir("attn-tutor", appauthor=False))


class UnknownLanguage(TutorError):
    """A language attn-tutor does not speak was asked for (``--lang``, ``ATTN_TUTOR_LANG``): a usage error."""


def language_code(value: str) -> str | None:
    """The language of :data:`tutor.base.messages.LANGUAGES` a language or locale name means, else ``None``.

    The name's first part decides (``zh``, ``zh_CN``, ``zh-Hans``, ``zh_TW.UTF-8`` are ``zh``; ``en_GB`` is
    ``en``), in any case; a catalogue registered by a test (``CATALOGS``) is matched by its whole name.

    >>> language_code("zh_CN.UTF-8"), language_code("EN-us"), language_code("C"), language_code("fr")
    ('zh', 'en', None, None)
    """
    name = value.strip()
    first = name.replace("-", "_").split("_")[0].split(".")[0].split("@")[0].lower()
    if first in LANGUAGES:
        return first
    return name if name and name in CATALOGS else None


def language_from(environ: Mapping[str, str]) -> str:
    """The language ``environ`` asks for: ``ATTN_TUTOR_LANG``; else the locale of messages (the first
    of ``LC_ALL``, ``LC_MESSAGES``, ``LANG`` that is set and not empty, as POSIX reads them) when it
    names a language attn-tutor speaks (``zh_CN.UTF-8``: Chinese); else English.

    Raises :class:`UnknownLanguage` for an ``ATTN_TUTOR_LANG`` that names no language attn-tutor
    speaks (a locale it does not speak is English: the locale is the system's, not a request).

    >>> language_from({"LANG": "zh_CN.UTF-8"}), language_from({"LC_ALL": "C", "LANG": "zh_CN.UTF-8"})
    ('zh', 'en')
    """
    asked = environ.get("ATTN_TUTOR_LANG", "")
    if asked.strip():
        code = language_code(asked)
        if code is None:
            raise UnknownLanguage(t("cli.lang.unknown", value=asked if len(asked) <= 40 else asked[:40] + "…", where="ATTN_TUTOR_LANG",
                                    languages=", ".join(LANGUAGES)))
        return code
    locale = next((environ[name] for name in ("LC_ALL", "LC_MESSAGES", "LANG") if environ.get(name)), "")
    return language_code(locale) or "en"


def clamp_width(value: str | None) -> int | None:
    """A width variable's value (``COLUMNS``, ``TERMINAL_WIDTH``) as a width within :data:`MIN_WIDTH` ..
    :data:`MAX_WIDTH`; ``None`` when it is not set or not a number (surrounding spaces are allowed).

    Compared as text first: ``int()`` refuses more than 4,300 digits.

    >>> clamp_width("0"), clamp_width("80"), clamp_width("9" * 5000), clamp_width("wide")
    (20, 80, 500, None)
    """
    digits = None if value is None else value.strip()
    if not (digits and digits.isascii() and digits.isdigit()):
        return None
    significant = digits.lstrip("0") or "0"
    if len(significant) > len(str(MAX_WIDTH)):
        return MAX_WIDTH
    return min(max(int(significant), MIN_WIDTH), MAX_WIDTH)


def pack_folders(value: str) -> tuple[Path, ...]:
    """The folders of an ``ATTN_TUTOR_PATH`` value: separated by :data:`os.pathsep`, blank parts left out."""
    return tuple(Path(part) for part in value.split(os.pathsep) if part.strip())


def _force_terminal(variables: Mapping[str, str]) -> bool | None:
    """rich's reading of ``TTY_COMPATIBLE`` (``1``/``0``) and then ``FORCE_COLOR`` (set: a terminal
    unless empty); ``None`` when neither decides."""
    compatible = variables.get("TTY_COMPATIBLE", "")
    if compatible in ("0", "1"):
        return compatible == "1"
    force = variables.get("FORCE_COLOR")
    return None if force is None else force != ""


def _terminal_width() -> int:
    """The width of the terminal standard output is on (as :func:`shutil.get_terminal_size` measures
    it, without its ``COLUMNS``); 0 when there is none."""
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return 0
