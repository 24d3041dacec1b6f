"""The progress store: one SQLite file of every answered step, written before
its feedback is shown, opened checked (ours, intact, writable), never
losing an answer it cannot take yet; the statistics read from it, and the
FSRS schedule of every skill.

Where: ``progress.sqlite3`` in the data folder its caller names
(:func:`default_path`); the command line names the folder of its
:class:`tutor.base.env.Env` (:meth:`~tutor.base.env.Env.data_dir`:
``$ATTN_TUTOR_HOME``, else platformdirs' user data folder).  Nothing here
reads the environment.

One job per module:

* :mod:`.errors` -- one exception per failure (locked, full, damaged), and
  the one place an SQLite error becomes a sentence;
* :mod:`.schema` -- what the file holds (tables, version, application id),
  how a file is recognised as ours, and the migrations from older schemas;
* :mod:`.files` -- opening a file checked (ours, intact, readable,
  writable), read-only opens that work on read-only folders, a new file
  created atomically, a killed writer's hot journal undone;
* :mod:`.connection` -- :class:`Store`: an open file, each write in its own
  transaction (an answer, its mistakes and its review together);
* :mod:`.recorder` -- :class:`Recorder`: a session's answers on their way,
  none dropped while the file cannot take them, moved to a new file when the
  one opened was deleted or replaced mid-session;
* :mod:`.queries` -- the stats, what to practise next, where a session
  left off, which steps were solved;
* :mod:`.scheduling` -- spaced repetition: each graded step is an FSRS
  review of its skill (a step kind in an exercise family).
* :mod:`.export` -- a learner's record as the file ``stats --export``
  writes (no paths, no names), and a class's such files added up (issue 24).

Guarantees (each module says how it keeps its own): every answer is
committed before its feedback is shown, so ``kill -9`` loses nothing
already answered; an answer the file cannot take yet is kept and written
later; a file that is not ours, damaged or newer is refused and never
written; an older file is migrated once, in one transaction; ``stats`` and
``list`` only read.
"""

from .attempt import OUTCOMES, Attempt  # the record the store writes and reads (shared with the quiz)
from .connection import Store
from .errors import StoreDamagedError, StoreFullError, StoreGoneError, StoreLockedError
from .files import BUSY_TIMEOUT_MS, FILENAME, default_path
from .queries import MistakeCount, Place, Recommendation, Stats, StepStats, Unfinished, recommend, solved, unfinished
from .recorder import Recorder
from .scheduling import AGAIN, GOOD, HARD, Skill, skills
from .schema import APPLICATION_ID, SCHEMA_VERSION

__all__ = [
    "AGAIN",
    "APPLICATION_ID",
    "BUSY_TIMEOUT_MS",
    "FILENAME",
    "GOOD",
    "HARD",
    "OUTCOMES",
    "SCHEMA_VERSION",
    "Attempt",
    "MistakeCount",
    "Place",
    "Recommendation",
    "Recorder",
    "Skill",
    "Stats",
    "StepStats",
    "Store",
    "StoreDamagedError",
    "StoreFullError",
    "StoreGoneError",
    "StoreLockedError",
    "Unfinished",
    "default_path",
    "recommend",
    "skills",
    "solved",
    "unfinished",
]
