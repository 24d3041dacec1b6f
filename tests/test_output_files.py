"""Every file attn-tutor writes on request goes through one function (issue 8, second round, item 6).

``new -o FIFO --force`` hung forever and ``--force`` wrote into character devices, while ``--export``
refused non-regular files.  Now ``new -o`` and ``explain --export`` share :func:`tutor.base.outfile.write_file`:
an existing path that is not a regular file is refused even with ``--force``, and nothing blocks.
"""

from __future__ import annotations

import os

import pytest

from tutor.base import outfile
from tutor.base.errors import TutorError

TARGETS = {
    "fifo": lambda p: os.mkfifo(p),
    "link to a fifo": lambda p: (os.mkfifo(p.parent / "pipe"), p.symlink_to(p.parent / "pipe")),
    "link to a device": lambda p: p.symlink_to("/dev/null"),
    "directory": lambda p: p.mkdir(),
}
KINDS = {"fifo": "a named pipe (FIFO)", "link to a fifo": "a named pipe (FIFO)", "link to a device": "a device",
         "directory": "a directory"}


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("force", [True, False])
@pytest.mark.parametrize("command", ["new", "export"])
@pytest.mark.timeout(60)  # the FIFO hung before: a hang fails the test
def test_a_path_that_is_not_a_regular_file_is_refused_even_with_force(cli, tmp_path, target, force, command):
    """The command as typed in ``tmp_path``; a file name given relative to it."""
    name = "out.yaml" if command == "new" else "out.html"
    TARGETS[target](tmp_path / name)
    args = ["new", "--seed", "1", "-o", name] if command == "new" else ["explain", "single-head-3x4", "--export", name]
    done = cli(*args, *(["--force"] if force else []), cwd=tmp_path)
    if target == "directory":  # the option itself refuses a folder (a usage error)
        assert done.code == 2 and "is a directory" in done.err
        return
    assert done.code == 2
    assert done.err == (f"error: {name} exists and is {KINDS[target]}, not a regular file, so nothing is written to "
                        "it, even with --force; write to a file name\n")
    assert done.out == ""


def test_a_fifo_that_appears_after_the_look_fails_at_once(tmp_path, monkeypatch):
    """The name may change between the check and the open: the open does not wait for a reader, and a
    FIFO opened (a reader was there) is refused by what fstat says."""
    monkeypatch.setattr(outfile, "check_target", lambda path, force: None)
    fifo = tmp_path / "p.yaml"
    os.mkfifo(fifo)
    with pytest.raises(TutorError, match=r"cannot write .*p\.yaml: No such device or address"):
        outfile.write_file(fifo, "text", force=True)  # no reader: ENXIO, not a hang
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with pytest.raises(TutorError, match="is a named pipe"):
            outfile.write_file(fifo, "text", force=True)
        assert os.read(reader, 10) == b""  # nothing was written into it
    finally:
        os.close(reader)


def test_a_regular_file_is_replaced_only_with_force_and_a_new_one_is_created(tmp_path):
    path = tmp_path / "x.yaml"
    outfile.write_file(path, "first √\n", force=False)
    assert path.read_text(encoding="utf-8") == "first √\n"
    with pytest.raises(TutorError, match="already exists; choose another file or add --force"):
        outfile.write_file(path, "second\n", force=False)
    outfile.write_file(path, "2\n", force=True)
    assert path.read_text() == "2\n"  # truncated: nothing of the longer first text is left


def test_a_link_to_a_regular_file_writes_the_file(tmp_path):
    real = tmp_path / "real.yaml"
    real.write_text("old")
    (tmp_path / "link.yaml").symlink_to(real)
    outfile.write_file(tmp_path / "link.yaml", "new\n", force=True)
    assert real.read_text() == "new\n" and (tmp_path / "link.yaml").is_symlink()


def test_new_and_export_write_through_the_one_function(cli, tmp_path, monkeypatch):
    calls = []
    real = outfile.write_file
    monkeypatch.setattr(outfile, "write_file", lambda path, text, *, force: (calls.append(path.name),
                                                                             real(path, text, force=force)))
    assert cli("new", "--seed", "3", "-o", str(tmp_path / "a.yaml")).code == 0
    assert cli("explain", "single-head-3x4", "--export", str(tmp_path / "a.md")).code == 0
    assert calls == ["a.yaml", "a.md"]
