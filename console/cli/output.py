"""The files a command writes when its work is done (``--json``, ``--markdown``,
``--record``, ``--write-docs``): checked before the work, so that a typo in a path does not
cost a long run, and written whole or not at all, so that a full disk leaves the file that
was there."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from fabric_core.textfile import write_text


def file_path(text: str) -> Path:
    """An argparse type: ``text`` as a path to a file, refused when empty (``Path("")`` is
    ``.``, the working directory, which the errors then named instead of the empty
    name) or ``-``, which other tools read as standard output."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a file name, got {text!r}")
    if text == "-":  # (a file named "-" was written, where a pipe was meant)
        raise argparse.ArgumentTypeError(
            "'-' is no file here (standard input and output are not read or written as "
            "'-'): name a file; to write to standard output, /dev/stdout"
        )
    return Path(text)


def output_problem(path: Path, make_parents: bool = False) -> str | None:
    """Why a file could not be written at ``path`` (None: it can be): the directory must
    exist (or, with ``make_parents``, be creatable: its nearest existing ancestor a
    writable directory) and be writable, and the path must not be a directory or a file
    without write access."""
    if path.is_dir():
        return "is a directory"
    parent = path.parent
    if make_parents:
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
    if not parent.is_dir():
        return (
            f"no such directory {parent}" if not parent.exists() else f"{parent} is not a directory"
        )
    if path.is_symlink() or (path.exists() and not path.is_file()):
        # written in place (textfile.write_text): the file itself must take it
        if not os.access(path, os.W_OK):
            return "not writable (permission denied or a read-only file system)"
    elif not os.access(parent, os.W_OK | os.X_OK):
        # a new file, or a regular one replaced by a file written beside it and renamed
        return f"cannot create a file in {parent} (permission denied or a read-only file system)"
    else:
        # (access() passes for root where no file can be made: /proc, say. So one is made
        # beside the path, as the writing will, and removed)
        try:
            fd, probe = tempfile.mkstemp(dir=parent, prefix=f".{path.name}.", suffix=".check")
        except OSError as exc:
            return f"cannot create a file in {parent} ({exc.strerror or exc})"
        os.close(fd)
        os.unlink(probe)
    return None


def refuse_bad_outputs(
    outputs: Iterable[tuple[str, Path | None]], make_parents: bool = False
) -> bool:
    """Check each ``(option, path)`` given (``path`` not None) with ``output_problem``;
    print the first problem as ``fabtop: OPTION PATH: problem`` and return True if there
    is one (the command then exits 2 before its work)."""
    for option, path in outputs:
        problem = None if path is None else output_problem(path, make_parents)
        if problem is not None:
            print(f"fabtop: {option} {path}: {problem}", file=sys.stderr)
            return True
    return False


def write_output(path: Path, text: str) -> bool:
    """Write ``text`` to ``path`` whole or not at all (``textfile.write_text``); on failure
    print ``fabtop: cannot write PATH: reason`` and return False."""
    try:
        write_text(path, text)
    except OSError as exc:
        print(f"fabtop: cannot write {path}: {exc.strerror or exc}", file=sys.stderr)
        return False
    return True
