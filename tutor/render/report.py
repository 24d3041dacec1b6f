"""``attn-tutor report`` (issue 24): the class view for a terminal, as Markdown, or as JSON.

Rendered from :class:`tutor.audit.classview.ClassReport` (graded submissions)
and :func:`tutor.store.export.class_progress`'s document (the class's
progress files); nothing here computes.  :func:`report_document` is the JSON
and what the other two formats read, so the three say the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from ..audit.batch import place_label
from ..audit.classview import ClassReport
from ..base.ascii import asciify, is_utf
from ..base.decimals import trimmed
from ..base.messages import join_and, join_sentences, plural, t
from ..base.textsafe import shown
from ..practice.stats import mistake_name


def _percent(part: int, whole: int) -> str:
    return trimmed(100 * part / whole, 1) if whole else "—"


def report_document(classview: ClassReport | None, progress: dict[str, Any] | None, *, unread: Sequence[str] = (),
                    passed_over: Sequence[str] = (), same: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
    """``{"submissions": ..., "progress": ..., "sources": ...}``, either of the first two ``null`` when its source
    was not given.

    ``sources``: ``unread`` (a source that could not be read: the line saying which and why, as the error of
    ``report`` over it alone says it; the report is of the others), ``passed_over`` (what the folders hold that
    ``report`` does not read: a name, ``x.txt``, or a subfolder's, ``sub/``) and ``same`` (``{"file", "same_as"}``:
    a progress file whose content is that of another one, counted once).

    ``submissions``: ``summary`` (how many, and of each verdict), ``steps`` (``{"exercise", "step", "given",
    "right", "share"}``: ``step`` the place as the files write it, ``heads[0].q``, which the terminal and
    Markdown name as a student reads it in the run's language, ``q (head 1)``; ``share`` right of given as a fraction from 0 to 1, 4 places, as ``accuracy`` is in
    ``progress`` and in ``stats``), ``mistakes`` (most made first:
    ``{"key", "name", "submissions", "example", "exercise", "step"}``), ``assign`` (for the most common
    mistake: ``{"mistake", "tied", "exercise", "step", "tiled", "shows", "backward", "apart", "alike_everywhere", "command"}``, ``tied``
    every mistake made as often as it, itself first; ``apart`` for one error whose causes its exercise could
    not tell apart, those that give different numbers on ``exercise``; ``alike_everywhere`` true when no bundled
    exercise gives them different numbers at the step; ``null`` when none was made), ``copies`` (``{"student", "exercise",
    "variant_of"}``: a roster variant handed in by another student) and ``duplicates`` (``{"student",
    "files"}``: a student who handed in more than one file).
    ``progress``: :func:`tutor.store.export.class_progress`'s document, each mistake with its ``name``.
    """
    subs = None
    if classview is not None:
        a = classview.assign
        subs = {
            "summary": classview.counts,
            "steps": [{"exercise": s.exercise, "step": s.place, "given": s.given, "right": s.right,
                       "share": round(s.right / s.given, 4) if s.given else None} for s in classview.steps],
            "mistakes": [{"key": m.key, "name": mistake_name(m.key), "submissions": m.count, "example": m.example,
                          "exercise": m.exercise, "step": m.step} for m in classview.mistakes],
            "assign": None if a is None else {"mistake": a.key, "tied": [m.key for m in classview.most_common],
                                              "exercise": a.exercise, "step": a.step, "tiled": a.tiled,
                                              "shows": a.shows, "backward": a.backward, "apart": list(a.apart),
                                              "alike_everywhere": a.alike_everywhere, "command": a.command},
            "copies": [{"student": st, "exercise": ex, "variant_of": owner} for st, ex, owner in classview.copies],
            "duplicates": [{"student": st, "files": list(files)} for st, files in classview.duplicates],
        }
    prog = None
    if progress is not None:
        prog = {**progress, "mistakes": [{**m, "name": mistake_name(m["key"])} for m in progress["mistakes"]]}
    sources = {"unread": list(unread), "passed_over": list(passed_over),
               "same": [{"file": f, "same_as": other} for f, other in same]}
    return {"submissions": subs, "progress": prog, "sources": sources}


def _source_notes(doc: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The lines about the sources: the files not read for a reason (each its reason), and the other notes."""
    src = doc.get("sources") or {}
    notes = [t("report.same", file=s["file"], other=s["same_as"]) for s in src.get("same", [])]
    if src.get("passed_over"):
        notes.append(t("report.passed_over", files=join_and(src["passed_over"])))
    return [line for text in src.get("unread", []) for line in text.split("\n")], notes


def _assign_sentence(a: dict[str, Any]) -> str:
    """What to assign next; on a tie every mistake made as often is named (``report.assign.tied.*``), the
    assignment being for the first of them."""
    name = mistake_name(a["mistake"])
    tied = a.get("tied") or [a["mistake"]]
    kind = "tiled" if a["tiled"] else "step" if a["step"] is not None else "exercise"
    if kind == "exercise" and a.get("backward"):  # a gradient's mistake: it shows in that exercise's backward pass only
        kind = "exercise.backward"
    fields: dict[str, Any] = {"mistake": name, "exercise": a["exercise"]}
    if kind == "step":
        fields["step"] = a["step"]
    if kind == "exercise" and a.get("apart"):  # one error's causes: the exercise where they give different numbers
        kind, fields["told"] = "apart", join_and([t("report.assign.tied.name", name=mistake_name(k)) for k in a["apart"]])
    if len(tied) < 2:
        said = t(f"report.assign.{kind}", **fields)
    else:
        names = [t("report.assign.tied.name", name=mistake_name(k)) for k in tied]  # 「…」 in Chinese: a name holds "，"
        said = t(f"report.assign.tied.{kind}", mistakes=join_and(names), **fields)
    if kind == "step" and a.get("alike_everywhere"):  # one error's causes that no bundled exercise tells apart
        said = join_sentences([said, t("report.assign.alike_everywhere")])
    return said


def _retention(skill: dict[str, Any]) -> str:
    """``80% / 90%`` (lowest / mean) of the learners who have recalled the skill; ``—`` when none has."""
    if skill["retention_min"] is None:
        return "—"
    return t("report.retention", low=trimmed(100 * skill["retention_min"], 1), mean=trimmed(100 * skill["retention_mean"], 1))


def _notes(subs: dict[str, Any]) -> list[str]:
    """The lines about copied variants and students with more than one file, in the order of the rows."""
    out = [t("report.copy", student=c["student"], exercise=c["exercise"], owner=c["variant_of"])
           for c in subs.get("copies", [])]
    out += [t("batch.duplicate", student=d["student"], files=join_and(d["files"])) for d in subs.get("duplicates", [])]
    return out


# --- a terminal ------------------------------------------------------------------------------------


def render_report(doc: dict[str, Any], console: Console) -> None:
    """The class view on ``console``: tables of the steps and the mistakes, what to assign, the progress."""
    uni = is_utf(console.encoding)

    def tx(text: object) -> str:
        words = shown(str(text))
        return words if uni else asciify(words)

    def table(headers: list[str], rows: list[list[str]], right: set[int]) -> None:
        tab = Table(box=box.SIMPLE_HEAD if uni else box.ASCII, show_edge=False)
        for i, h in enumerate(headers):
            # a number's column, its header too, never wraps ("never" over "recalled" reads as two columns):
            # the words of the other columns wrap instead
            tab.add_column(tx(h), justify="right" if i in right else "left", overflow="fold", no_wrap=i in right)
        for r in rows:
            tab.add_row(*[tx(c) for c in r])
        console.print(Padding(tab, (0, 0, 0, 2), expand=False))

    unread, notes = _source_notes(doc)
    if unread:
        console.print(Text(tx(t("report.unread")), style="bold red"))
        for line in unread:
            console.print(Text(tx("  " + line), style="red"), overflow="fold")
    for note in notes:
        console.print(Text(tx(note), style="yellow"))
    if unread or notes:
        console.print()
    subs = doc["submissions"]
    if subs is not None:
        c = subs["summary"]
        console.print(Text(tx(t("report.submissions", submissions=plural("batch.submissions", c["submissions"]),
                                 correct=c["correct"], wrong=c["wrong"], unusable=c["unusable"])), style="bold"))
        for note in _notes(subs):
            console.print(Text(tx(note), style="yellow"), overflow="fold")
        console.print()
        console.print(Text(tx(t("report.by_step")), style="bold"))
        table([t("report.col.exercise"), t("report.col.step"), t("report.col.right"), t("report.col.share")],
              [[s["exercise"], str(place_label(s["step"])), f"{s['right']}/{s['given']}", _percent(s["right"], s["given"]) + "%"]
               for s in subs["steps"]], {2, 3})
        console.print()
        if subs["mistakes"]:
            console.print(Text(tx(t("report.mistakes")), style="bold"))
            table([t("report.col.mistake"), t("report.col.submissions"), t("report.col.example")],
                  [[m["name"], str(m["submissions"]), t("report.example", student=m["example"], step=m["step"])]
                   for m in subs["mistakes"]], {1})
        else:
            console.print(Text(tx(t("report.no_mistakes")), style="bold"))
        a = subs["assign"]
        if a is not None:
            console.print()
            console.print(Text(tx(_assign_sentence(a)), style="bold"))
            console.print(Padding(Text(tx(a["command"])), (0, 0, 0, 2), expand=False))
    prog = doc["progress"]
    if prog is not None:
        if subs is not None:
            console.print()
        console.print(Text(tx(t("report.progress", learners=plural("report.learners", prog["learners"]))), style="bold"))
        table([t("report.col.step"), t("report.col.learners"), t("report.col.accuracy")],
              [[s["step"], str(s["learners"]), "—" if s["accuracy"] is None else trimmed(100 * s["accuracy"], 1) + "%"]
               for s in prog["steps"]], {1, 2})
        if prog["practised"]:
            console.print(Text(tx(t("report.practised")), style="bold"))
            table([t("report.col.exercise"), t("report.col.step"), t("report.col.learners"), t("report.col.answers")],
                  [[p["exercise"], p["step"], str(p["learners"]), str(p["graded"])] for p in prog["practised"]], {2, 3})
        if prog["skills"]:
            console.print(Text(tx(t("report.skills")), style="bold"))
            table([t("report.col.step"), t("report.col.family"), t("report.col.learners"), t("report.col.due"),
                   t("report.col.never_recalled"), t("report.col.retention")],
                  [[k["step"], k["family"], str(k["learners"]), str(k["due"]), str(k.get("never_recalled", 0)),
                    _retention(k)] for k in prog["skills"]], {2, 3, 4, 5})
        if prog["mistakes"]:
            console.print(Text(tx(t("report.progress.mistakes")), style="bold"))
            table([t("report.col.mistake"), t("report.col.learners"), t("report.col.times")],
                  [[m["name"], str(m["learners"]), str(m["count"])] for m in prog["mistakes"]], {1, 2})


# --- Markdown --------------------------------------------------------------------------------------


def _md(text: object) -> str:
    """Text in a Markdown table's cell: control characters escaped, ``|`` and the markup characters escaped."""
    out = shown(str(text))
    for ch in "\\|*_`[]<>#":
        out = out.replace(ch, "\\" + ch)
    return out


def _heading(level: int, text: str) -> str:
    """A Markdown heading of ``level`` holding ``text`` (escaped): the marker is markup, the text one template."""
    return "#" * level + " " + _md(text)


def _md_table(headers: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    lines = ["| " + " | ".join(_md(h) for h in headers) + " |",
             "|" + "|".join("---:" if i in right else "---" for i in range(len(headers))) + "|"]
    lines += ["| " + " | ".join(_md(c) for c in r) + " |" for r in rows]
    return lines


def report_markdown(doc: dict[str, Any]) -> str:
    """The class view as Markdown: a heading per part, the same tables as the terminal's."""
    out: list[str] = [_heading(1, t('report.title')), ""]
    unread, notes = _source_notes(doc)
    if unread:
        out += [_md(t("report.unread")), ""] + ["- " + _md(line) for line in unread] + [""]
    if notes:
        out += ["- " + _md(n) for n in notes] + [""]
    subs = doc["submissions"]
    if subs is not None:
        c = subs["summary"]
        out += [_md(t("report.submissions", submissions=plural("batch.submissions", c["submissions"]),
                      correct=c["correct"], wrong=c["wrong"], unusable=c["unusable"])), ""]
        notes = _notes(subs)
        if notes:
            out += ["- " + _md(n) for n in notes] + [""]
        out += [_heading(2, t('report.by_step')), ""]
        out += _md_table([t("report.col.exercise"), t("report.col.step"), t("report.col.right"), t("report.col.share")],
                         [[s["exercise"], str(place_label(s["step"])), f"{s['right']}/{s['given']}",
                           _percent(s["right"], s["given"]) + "%"] for s in subs["steps"]], {2, 3})
        out += ["", _heading(2, t('report.mistakes')), ""]
        if subs["mistakes"]:
            out += _md_table([t("report.col.mistake"), t("report.col.submissions"), t("report.col.example")],
                             [[m["name"], str(m["submissions"]), t("report.example", student=m["example"], step=m["step"])]
                              for m in subs["mistakes"]], {1})
        else:
            out.append(_md(t("report.no_mistakes")))
        a = subs["assign"]
        if a is not None:
            out += ["", _heading(2, t('report.next')), "", _md(_assign_sentence(a)), "", "```", a["command"], "```"]
    prog = doc["progress"]
    if prog is not None:
        out += ["", _heading(2, t('report.progress', learners=plural('report.learners', prog['learners']))), ""]
        out += _md_table([t("report.col.step"), t("report.col.learners"), t("report.col.accuracy")],
                         [[s["step"], str(s["learners"]),
                           "—" if s["accuracy"] is None else trimmed(100 * s["accuracy"], 1) + "%"]
                          for s in prog["steps"]], {1, 2})
        if prog["practised"]:
            out += ["", _heading(3, t("report.practised")), ""]
            out += _md_table([t("report.col.exercise"), t("report.col.step"), t("report.col.learners"),
                              t("report.col.answers")],
                             [[p["exercise"], p["step"], str(p["learners"]), str(p["graded"])] for p in prog["practised"]],
                             {2, 3})
        if prog["skills"]:
            out += ["", _heading(3, t('report.skills')), ""]
            out += _md_table([t("report.col.step"), t("report.col.family"), t("report.col.learners"),
                              t("report.col.due"), t("report.col.never_recalled"), t("report.col.retention")],
                             [[k["step"], k["family"], str(k["learners"]), str(k["due"]),
                               str(k.get("never_recalled", 0)), _retention(k)] for k in prog["skills"]], {2, 3, 4, 5})
        if prog["mistakes"]:
            out += ["", _heading(3, t('report.progress.mistakes')), ""]
            out += _md_table([t("report.col.mistake"), t("report.col.learners"), t("report.col.times")],
                             [[m["name"], str(m["learners"]), str(m["count"])] for m in prog["mistakes"]], {1, 2})
    return "\n".join(out).rstrip() + "\n"
