"""Where exercises come from: the bundled folder, or a path.

``resolve("single-head-3x4")`` finds a bundled exercise by id;
``resolve("my/file.yaml")`` loads a file.  Bundled files are named
``<id>.yaml``; they ship inside the wheel as ``tutor/exercises``.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from .errors import ExerciseError, NotFoundError
from .exercise import load_exercise
from .messages import t
from .model import Exercise

_SUFFIXES = (".yaml", ".yml")


def bundled_dir() -> Path:
    """The bundled exercises: inside the installed package, else the source checkout's ``exercises/``."""
    packaged = Path(str(resources.files("tutor"))) / "exercises"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent / "exercises"


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix in _SUFFIXES and p.is_file()) if folder.is_dir() else []


def looks_like_path(name: str) -> bool:
    return name.endswith(_SUFFIXES) or "/" in name or "\\" in name or Path(name).is_file()


def resolve(name: str) -> Exercise:
    """The exercise named by a bundled id or a file path.

    Raises :class:`NotFoundError` when neither matches, and
    :class:`ExerciseError` when the file is invalid.
    """
    if looks_like_path(name):
        path = Path(name)
        if not path.exists():
            raise NotFoundError(t("catalog.not_found", name=name))
        return load_exercise(str(path))
    folder = bundled_dir()
    direct = [folder / f"{name}{s}" for s in _SUFFIXES if (folder / f"{name}{s}").is_file()]
    for path in direct + _files(folder):
        try:
            ex = load_exercise(str(path), display=f"bundled:{path.name}")
        except ExerciseError:
            continue
        if ex.id == name:
            return ex
    raise NotFoundError(t("catalog.not_found", name=name) + f" ({t('catalog.not_found.hint')})")


def bundled() -> list[Exercise]:
    """Every bundled exercise, sorted by id.  Raises :class:`ExerciseError` for a broken one."""
    return sorted((load_exercise(str(p), display=f"bundled:{p.name}") for p in _files(bundled_dir())), key=lambda e: e.id)
