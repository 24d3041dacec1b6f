"""The one kind of rich console every renderer writes to.

:class:`SafeConsole` escapes control characters (:func:`tutor.base.textsafe.shown`)
in the text of everything it renders, after layout, as a last line of
defence: the renderers already escape text from files before laying it out
(so widths stay right), and whatever one of them forgets still reaches the
terminal, the recording of an HTML or SVG page, only as visible escapes
(laid out for the shorter raw text, so such a line may be cropped or
misaligned, never raw).  Only rich's own control segments pass unchanged.

:func:`make_console` is the factory: markup and highlighting off (text from a
file is shown as written, never read as rich markup); width, colour and
terminal from a :class:`tutor.base.env.Env`, never from the process's
environment; and a width from :data:`MIN_WIDTH` to :data:`MAX_WIDTH` columns
whatever the Env or the terminal says (at ``COLUMNS=0`` rich would print
nothing, or wrap a word per character; at ``COLUMNS=1000000`` it wrote 23 MB).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment

from ..base.cjk import WORD
from ..base.env import MAX_WIDTH, MIN_WIDTH, Env
from ..base.textsafe import shown


class SafeConsole(Console):
    """A rich console whose rendered text never holds a raw control character (newlines and tabs excepted)."""

    _escaping = False  # inside an outermost render: every segment passes through it, so nested ones need not check

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        """Rich's rendering, with the text of every non-control segment escaped.

        Only the outermost call (``print`` -> ``render``) escapes: the
        segments of nested renders (a table's cells) all come out through it.
        """
        if self._escaping:
            return super().render(renderable, options)
        return self._escaped(renderable, options)

    def _escaped(self, renderable: RenderableType, options: ConsoleOptions | None) -> Iterable[Segment]:
        self._escaping = True
        try:
            for segment in super().render(renderable, options):
                text = segment.text
                if segment.control or text.isprintable():
                    yield segment
                else:
                    yield Segment(shown(text, keep="\n\t"), segment.style, segment.control)
        finally:
            self._escaping = False


def line_breaks() -> None:
    """Let rich break a line between two Chinese characters (:data:`tutor.base.cjk.WORD`, its word
    pattern; the same as rich's own for text without Chinese).  Idempotent; every console made here
    and typer's help (:func:`tutor.cli.common.help_console`) call it."""
    import rich._wrap
    from rich.text import Text

    rich._wrap.re_word = WORD  # type: ignore[assignment]  # its one use is re_word.match(text, pos)
    if not getattr(Text.__rich_measure__, "breaks_chinese", False):
        Text.__rich_measure__ = _measured(Text.__rich_measure__)  # type: ignore[method-assign]
        Text.rstrip_end = _rstrip_end  # type: ignore[method-assign]


def _rstrip_end(self: Any, size: int) -> None:
    """rich's ``Text.rstrip_end`` (drop the spaces that end a wrapped line past ``size``) measuring in cells,
    not characters: rich counts ``len()``, so a line of Chinese (two cells a character) kept its last space,
    and a table cropped the line's last character to fit it, with "…"."""
    from rich.cells import cell_len

    excess = cell_len(self.plain) - size
    if excess > 0:
        spaces = len(self.plain) - len(self.plain.rstrip(" "))
        if spaces:
            self.right_crop(min(spaces, excess))


def _measured(measure: Any) -> Any:
    """rich's measure of a text, whose narrowest width is its longest word (``text.split()``: a Chinese
    sentence is one word), with the narrowest width of a text with Chinese in it its longest piece that
    no line may break (:func:`tutor.base.cjk.pieces`): a table gives such a column room to wrap instead of
    cutting its lines short with "…"."""
    from rich.cells import cell_len
    from rich.measure import Measurement

    from ..base.cjk import has_unspaced, pieces

    def __rich_measure__(self: Any, console: Any, options: Any) -> Any:
        found = measure(self, console, options)
        if not has_unspaced(self.plain):
            return found
        narrowest = max((cell_len(p) for p in pieces(self.plain)), default=0)
        return Measurement(min(found.minimum, narrowest), found.maximum)

    __rich_measure__.breaks_chinese = True  # type: ignore[attr-defined]
    return __rich_measure__


def make_console(env: Env | None, **options: Any) -> SafeConsole:
    """A :class:`SafeConsole` (markup, highlighting and soft wrapping off unless given) from
    :data:`MIN_WIDTH` to :data:`MAX_WIDTH` wide, whatever the Env, the terminal or ``width`` say.

    ``env`` gives the width (unless ``width`` is given), colour and terminal
    settings, and the variables rich reads itself (``TERM`` ...); ``None``
    is a console of no terminal that reads no variable (a recording exported
    to a file).  ``options`` are rich's.
    """
    line_breaks()
    settings: dict[str, Any] = {"highlight": False, "soft_wrap": False, "markup": False}
    if env is None:
        settings["_environ"] = {}
    else:
        settings.update(width=env.width, no_color=env.no_color, force_terminal=env.force_terminal,
                        _environ=env.environ)
    console = SafeConsole(**{**settings, **options})
    if console.width < MIN_WIDTH:
        console.width = MIN_WIDTH
    if console.width > MAX_WIDTH:
        console.width = MAX_WIDTH
    return console
