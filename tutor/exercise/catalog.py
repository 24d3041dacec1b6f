"""Where exercises come from: the bundled folder, exercise packs, or a path.

``resolve("single-head-3x4")`` finds an exercise by id; ``resolve("my/file.yaml")``
loads a file.  Bundled files are named ``<id>.yaml``; they ship inside the
wheel as ``tutor/exercises``.

Exercise packs are more folders searched after the bundled one, passed in as
``folders``: the command line's ``--exercises DIR``, then those of
``ATTN_TUTOR_PATH`` (:attr:`tutor.base.env.Env.packs`; nothing here reads the
environment).  Every
``*.yaml``/``*.yml`` below a pack folder is read (hidden folders such as
``.github`` are skipped, and so are solution files, which start with
``exercise:``).  An id defined twice is a problem naming both files - never
silently shadowed - and a broken file is a problem that does not stop the
others from being listed.  Pure: nothing here prints.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
import stat
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..base.errors import ExerciseError, NotFoundError, Problem
from ..base.messages import t
from ..base.outfile import os_reason
from .load import Validation, load_exercise, validate_document
from .record import Exercise
from .yamlread import parse_yaml, read_text

_SUFFIXES = (".yaml", ".yml")
BUNDLED = "bundled"


def bundled_dir() -> Path:
    """The bundled exercises: inside the installed package, else the source checkout's ``exercises/``."""
    packaged = Path(str(resources.files("tutor"))) / "exercises"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "exercises"


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix in _SUFFIXES and p.is_file()) if folder.is_dir() else []


def yaml_files(folder: Path) -> list[Path]:
    """Every ``*.yaml``/``*.yml`` file below ``folder``, sorted; hidden folders and files are skipped."""
    found = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found += [Path(root) / f for f in files if f.endswith(_SUFFIXES) and not f.startswith(".")]
    return sorted(found)


def looks_like_path(name: str) -> bool:
    """True when ``name`` names a file rather than an id (a YAML suffix, a separator, or an existing file)."""
    return name.endswith(_SUFFIXES) or "/" in name or "\\" in name or Path(name).is_file()


# --- packs -------------------------------------------------------------------


@dataclass(frozen=True)
class Folder:
    """One place exercises come from: ``label`` is ``bundled`` or the folder as given."""

    path: Path
    label: str

    @property
    def bundled(self) -> bool:
        """True for the folder of bundled exercises."""
        return self.label == BUNDLED


@dataclass(frozen=True)
class Entry:
    """An exercise found in a folder, with the file it came from."""

    exercise: Exercise
    folder: Folder
    file: Path

    @property
    def source(self) -> str:
        """Where it comes from, as ``list`` shows it: ``bundled`` or the pack folder."""
        return self.folder.label


@dataclass(frozen=True)
class Catalog:
    """Every exercise of the bundled folder and the packs, and every problem found on the way.

    ``entries`` are sorted by id; an id defined in two files appears twice
    (once per file) and is named in ``problems``, as is every broken file.
    """

    entries: tuple[Entry, ...]
    problems: tuple[Problem, ...]
    folders: tuple[Folder, ...]

    def find(self, exercise_id: str) -> list[Entry]:
        """The entries with this id (more than one when it clashes)."""
        return [e for e in self.entries if e.exercise.id == exercise_id]


def real_path(path: str | Path) -> str:
    """``path`` with every symbolic link resolved; never raises (a symlink loop stays as far as it resolves)."""
    return os.path.realpath(path)


def search_folders(folders: Iterable[str | Path] = ()) -> list[Folder]:
    """The bundled folder, then the packs ``folders`` (``--exercises``, then ``ATTN_TUTOR_PATH``); each once."""
    out = [Folder(bundled_dir(), BUNDLED)]
    seen = {real_path(out[0].path)}
    for p in [Path(f) for f in folders]:
        key = real_path(p)
        if key not in seen:
            seen.add(key)
            out.append(Folder(p, str(p)))
    return out


def _display(folder: Folder, file: Path) -> str:
    return f"bundled:{file.relative_to(folder.path).as_posix()}" if folder.bundled else str(file)


def is_solution_file(value: object) -> bool:
    """True for a solution file (what ``attn-tutor check`` reads): ``exercise:`` at the top, no ``id``."""
    return isinstance(value, dict) and "exercise" in value and "id" not in value


def read_exercise_file(file: Path, display: str | None = None) -> Validation | None:
    """Validate one exercise file; ``None`` for a solution file, which is not an exercise.

    Never raises for what the file holds: a file that is not a regular file
    (a FIFO, a device, a directory, a symlink loop) or cannot be read is a
    problem, and so - as a last guard, so that one file never stops a pack
    from loading - is an unexpected error while reading it.
    """
    name = display or str(file)
    try:
        return _read_exercise_file(file, name)
    except Exception as err:  # a bug in reading one file: reported with the file, never raised to the pack
        return Validation(name, (Problem(name, None, None, "", t("catalog.file_failed", reason=type(err).__name__),
                                         t("catalog.file_failed.hint")),))


def _read_exercise_file(file: Path, name: str) -> Validation | None:
    text, problems = read_text(str(file), name)
    if text is None:
        return Validation(name, tuple(problems))
    doc = parse_yaml(text, name)
    if not doc.problems and is_solution_file(doc.value):
        return None
    return validate_document(doc)


def load_catalog(folders: Iterable[str | Path] = ()) -> Catalog:
    """Read the bundled folder and every pack; never raises for a bad pack or file.

    A folder that does not exist, an unreadable or invalid file, and an id
    defined twice each become a :class:`Problem`; the valid exercises are
    all listed.
    """
    places = search_folders(folders)
    entries: list[Entry] = []
    problems: list[Problem] = []
    first: dict[str, Entry] = {}
    for folder in places:
        if not folder.path.is_dir():
            problems.append(Problem(str(folder.path), None, None, "", t("catalog.no_folder"),
                                    t("catalog.no_folder.hint", sep=os.pathsep)))
            continue
        files = _files(folder.path) if folder.bundled else yaml_files(folder.path)
        for file in files:
            checked = read_exercise_file(file, _display(folder, file))
            if checked is None:
                continue
            if checked.exercise is None:
                problems.extend(checked.problems)
                continue
            entry = Entry(checked.exercise, folder, file)
            if entry.exercise.id in first:
                other = first[entry.exercise.id]
                problems.append(Problem(_display(folder, file), None, None, "id",
                                        t("catalog.duplicate_id", id=entry.exercise.id, first=other.exercise.source,
                                          second=entry.exercise.source), t("catalog.duplicate_id.hint")))
            else:
                first[entry.exercise.id] = entry
            entries.append(entry)
    entries.sort(key=lambda e: (e.exercise.id, places.index(e.folder), str(e.file)))
    return Catalog(tuple(entries), tuple(problems), tuple(places))


# --- one exercise ----------------------------------------------------------------


def resolve(name: str, folders: Sequence[str | Path] = ()) -> Exercise:
    """The exercise named by an id (bundled or in a pack) or a file path.

    Raises :class:`NotFoundError` when nothing matches or when the id is
    defined in two files (naming both), and :class:`ExerciseError` when the
    file is invalid.
    """
    if looks_like_path(name):
        path = Path(name)
        if not os.path.lexists(path):  # a broken link or a symlink loop exists, and is reported when read
            raise NotFoundError(t("catalog.not_found", name=name))
        ex = load_exercise(str(path))
        if (clash := reserved_clash(ex, path)) is not None:
            raise NotFoundError(clash)
        return ex
    return resolve_id(name, folders)


def bundled_ids() -> dict[str, Path]:
    """The id of every valid bundled exercise, and its file (read once per process and bundled folder:
    the bundled folder is read-only)."""
    global _BUNDLED_IDS
    folder = bundled_dir()
    if _BUNDLED_IDS is None or _BUNDLED_IDS[0] != folder:
        found: dict[str, Path] = {}
        for path in _files(folder):
            try:
                found.setdefault(load_exercise(str(path), display=f"bundled:{path.name}").id, path)
            except ExerciseError:
                continue
        _BUNDLED_IDS = (folder, found)
    return _BUNDLED_IDS[1]


_BUNDLED_IDS: tuple[Path, dict[str, Path]] | None = None


def _computes(ex: Exercise) -> tuple[object, ...]:
    """What an exercise computes from: its inputs, weights, biases and masks (not its title or labels)."""
    return (ex.x, ex.x_kv, ex.heads, ex.w_o, ex.b_o, ex.mask_kind, ex.mask, ex.key_padding)


def reserved_clash(ex: Exercise, file: str | Path) -> str | None:
    """The problem, naming both files, when ``file`` (not the bundled file) defines a bundled exercise's
    id for another exercise (other inputs, weights or masks); ``None`` otherwise.

    Bundled ids are reserved: such a file, read by its path, would be explained, practised (its answers
    stored under the bundled exercise's id, mixed into its statistics) and checked as if it were the
    bundled exercise.  A copy that computes the same (re-written, retitled) is the same exercise.
    """
    bundled_file = bundled_ids().get(ex.id)
    if bundled_file is None or real_path(Path(file)) == real_path(bundled_file):
        return None
    try:
        if _computes(load_exercise(str(bundled_file), display=f"bundled:{bundled_file.name}")) == _computes(ex):
            return None
    except ExerciseError:  # pragma: no cover - bundled_ids() lists only valid files
        pass
    return t("problem.with_hint", message=t("catalog.duplicate_id", id=ex.id, first=f"bundled:{bundled_file.name}",
                                            second=file), hint=t("catalog.duplicate_id.hint"))


def resolve_id(name: str, folders: Sequence[str | Path] = ()) -> Exercise:
    """The exercise with id ``name``: bundled, or in a pack (``folders``).

    Raises :class:`UnknownId` (a :class:`NotFoundError`) when no exercise has
    the id, and :class:`NotFoundError` when two do.
    """
    if folders:
        found = load_catalog(folders).find(name)
        if len(found) > 1:
            raise NotFoundError(t("problem.with_hint", message=t("catalog.duplicate_id", id=name, first=found[0].exercise.source,
                                  second=found[1].exercise.source), hint=t("catalog.duplicate_id.hint")))
        if found:
            return found[0].exercise
        raise UnknownId(_not_found(name, [e.exercise.id for e in load_catalog(folders).entries]))
    folder = bundled_dir()
    direct = [folder / f"{name}{s}" for s in _SUFFIXES if (folder / f"{name}{s}").is_file()]
    ids = []
    for path in direct + _files(folder):
        try:
            ex = load_exercise(str(path), display=f"bundled:{path.name}")
        except ExerciseError:
            continue
        if ex.id == name:
            return ex
        ids.append(ex.id)
    raise UnknownId(_not_found(name, ids))


def _not_found(name: str, ids: Sequence[str]) -> str:
    """No exercise has the id ``name``: the sentence, with the nearest id of ``ids`` when one is near
    (``single-head-3x3``: did you mean ``single-head-3x4``?), else the hint to list them."""
    near = difflib.get_close_matches(name, sorted(set(ids)), n=1, cutoff=0.75)
    hint = t("catalog.not_found.suggest", suggestion=near[0]) if near else t("catalog.not_found.hint")
    return t("problem.with_hint", message=t("catalog.not_found", name=name), hint=hint)


class UnknownId(NotFoundError):
    """No exercise, bundled or in a pack, has the id asked for."""


class RefusedReference(NotFoundError):
    """An exercise named inside another file (a solution's ``exercise:``) that is not read.

    ``message`` and ``hint`` never quote the named file's content.
    """

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.message, self.hint = message, hint


#: What an exercise id looks like (the schema's ``id``): anything else a file names is a path.
_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")


def names_a_file(name: str) -> bool:
    """True when ``name``, as written in a file, is a path rather than an id: anything but an
    id's lowercase letters, digits and ``-`` (``ex.yaml``, ``../ex``, ``notes.txt``), decided by
    the text alone, never by what exists in the current folder."""
    return _ID.fullmatch(name) is None


def resolve_reference(name: str, base: Path, folders: Sequence[str | Path] = (), *, shown_base: str = "") -> Exercise:
    """The exercise a file refers to by ``name`` (a solution file's ``exercise:``): an id, bundled
    or in a pack, or a path taken from ``base`` (the referring file's folder).

    What such a file names is not trusted (a student's solution names it, and
    ``check`` reports go back to students): a path is read only when, with
    every symbolic link followed, it is a regular ``.yaml``/``.yml`` file
    inside ``base`` or below, inside a pack folder (``folders``) or among the bundled exercises, and it is used only
    when it is a valid exercise.  Raises :class:`RefusedReference` otherwise
    (outside those folders - whether or not the file exists -, missing, not a
    regular file, not YAML, not a valid exercise) and :class:`NotFoundError`
    for an unknown or clashing id; no message quotes the named file's content, nor names a folder
    otherwise than as the referring file was named (``shown_base``, its folder as given: ``""`` for the
    current one) -- never an absolute folder the user did not type (issue 20, E).
    """
    if not names_a_file(name):
        try:
            return resolve_id(name, folders)
        except UnknownId:
            raise RefusedReference(t("reference.unknown_id", name=name), t("reference.unknown_id.hint")) from None
    roots = [base] + [f.path for f in search_folders(folders)]
    try:
        target = Path(os.path.realpath(base / name))  # an absolute name replaces base
        inside = any(_within(target, Path(os.path.realpath(r))) for r in roots)
    except (OSError, ValueError):  # a NUL character, a name too long for the system
        raise RefusedReference(t("reference.bad_name", path=name)) from None
    if not inside:
        raise RefusedReference(t("reference.outside", path=name), t("reference.outside.hint"))
    try:
        mode: int | None = target.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        mode = None
    except (OSError, ValueError) as err:
        raise RefusedReference(t("reference.unreadable", path=name, reason=os_reason(err))) from None
    if mode is None:
        raise RefusedReference(t("solution.exercise_missing", path=name))
    if not stat.S_ISREG(mode):  # a folder, a FIFO, a device: never opened
        raise RefusedReference(t("reference.not_file", path=name))
    if target.suffix not in _SUFFIXES:
        raise RefusedReference(t("reference.not_yaml", path=name))
    try:
        ex = load_exercise(str(target), display=name)
    except ExerciseError as err:  # its problems would quote it: say only that it is not an exercise
        raise RefusedReference(t("reference.invalid", path=name, count=len(err.problems)),
                               t("reference.invalid.hint", path=shlex.quote(os.path.join(shown_base, name)))) from None
    if reserved_clash(ex, target) is not None:
        raise RefusedReference(t("catalog.duplicate_id", id=ex.id, first=f"bundled:{bundled_ids()[ex.id].name}",
                                 second=name), t("catalog.duplicate_id.hint"))
    return ex


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


#: The order concepts are learnt in, by the tags that name them (README "Exercises"): an exercise
#: comes after the exercises of its difficulty whose most advanced concept is earlier than its own.
#: Every tag of a bundled exercise is here (tests/test_issue23_polish.py): a tag left out is ignored, so
#: a new concept would not count (format v3's did not, and a sliding window's rolling cache came before
#: the plain KV cache's decode step).
LEARNING_ORDER = ("basics", "single-head", "scaling", "mask", "padding", "causal", "multi-head", "per-head-form",
                  "fused-form", "bias", "output-projection", "cross-attention",
                  "grouped-kv", "kv-cache", "causal-alignment",  # format v2 (issue 12)
                  "sliding-window", "attention-sinks",  # format v3's masks (issue 23): the window, then its sinks
                  "position-bias",  # format v2's ALiBi
                  "position", "rope", "pre-norm", "residual", "rmsnorm", "layernorm", "post-norm",  # format v3
                  "latent-kv")  # format v3's multi-head latent attention (issue 23)


def learning_key(ex: Exercise) -> tuple[int, int, str]:
    """Where ``ex`` comes in learning order: by difficulty (none counts as 3), then by the most
    advanced concept its tags name in :data:`LEARNING_ORDER` (an exercise whose tags name none
    comes after those that do), then by id.

    """
    known = [LEARNING_ORDER.index(tag) for tag in ex.tags if tag in LEARNING_ORDER]
    return (ex.difficulty if ex.difficulty is not None else 3, max(known) if known else len(LEARNING_ORDER), ex.id)


def bundled() -> list[Exercise]:
    """Every bundled exercise, sorted by id.  Raises :class:`ExerciseError` for a broken one."""
    return sorted((load_exercise(str(p), display=f"bundled:{p.name}") for p in _files(bundled_dir())), key=lambda e: e.id)


def exercises(folders: Sequence[str | Path] = ()) -> list[Exercise]:
    """Every exercise of the bundled folder and the packs, sorted by id; broken files and clashes left out.

    For commands that pick from the catalogue (``practice``); :func:`load_catalog`
    has the problems too.
    """
    entries = load_catalog(folders).entries
    count = Counter(e.exercise.id for e in entries)
    return [e.exercise for e in entries if count[e.exercise.id] == 1]
