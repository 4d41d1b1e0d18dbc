"""Reading a text file a user names (a scenario, a topology, a record), within bounds,
and writing one whole or not at all; the names and descriptions in it checked as text a
terminal can show.

A bare ``Path.read_text`` reads whatever the path is: ``/dev/zero`` until the memory runs
out, a FIFO never (it waits for a writer), gigabytes of a file given by mistake. Each kind
of file has a size no real one comes near; past it, or when the path is not a regular
file or its bytes are not UTF-8, the error says so.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path


class TextFileError(ValueError):
    """The file cannot be read as text; ``str()`` is the reason, without the path."""


def plain_text(value: object, key: str, most: int, allowed: str = "") -> str:
    """``value``, a name or a description read from a file, as a string of 1 to ``most``
    characters without control characters (but those in ``allowed``): it reaches the
    console, reports, logs and metric labels, where an escape sequence would drive the
    terminal and a list would become its ``str()``.

    Raises:
        ValueError: naming ``key``.
    """
    if not isinstance(value, str):
        raise ValueError(f"{key}: must be a string, got {value!r}")
    if not value:
        raise ValueError(f"{key}: must not be empty")
    if len(value) > most:
        raise ValueError(f"{key}: at most {most:,} characters, got {len(value):,}")
    bad = next((c for c in value if not c.isprintable() and c not in allowed), None)
    if bad is not None:
        raise ValueError(f"{key}: holds the control character {bad!r}")
    return value


def read_bytes(path: Path, limit_bytes: int) -> bytes:
    """The bytes of the regular file at ``path``, of at most ``limit_bytes``.

    Raises:
        TextFileError: it cannot be read (the OS's reason), is not a regular file (a
            directory, a device, a FIFO) or is larger than ``limit_bytes``.
    """
    try:
        # non-blocking: opening a FIFO would wait for a writer; the kind is then checked on
        # what was opened, so the path cannot change in between
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise TextFileError(f"cannot read: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise TextFileError(f"not a regular file ({_kind(st.st_mode)})")
        if st.st_size > limit_bytes:
            raise TextFileError(f"{st.st_size:,} bytes; at most {_size(limit_bytes)} are read")
        with open(fd, "rb", closefd=False) as f:
            data = f.read(limit_bytes + 1)  # (one more: a file that grew since the stat)
    except OSError as exc:
        raise TextFileError(f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > limit_bytes:
        raise TextFileError(
            f"more than {limit_bytes:,} bytes; at most {_size(limit_bytes)} are read"
        )
    return data


#: The byte-order mark some editors (Windows' Notepad among them) put before UTF-8 text
UTF8_BOM = b"\xef\xbb\xbf"


def read_text(path: Path, limit_bytes: int) -> str:
    """The UTF-8 text of the regular file at ``path``, of at most ``limit_bytes`` bytes,
    less a byte-order mark it starts with: it marks the encoding, and TOML's and JSON's
    parsers, which take no mark, refused the file for its first character ("Invalid
    statement (at line 1, column 1)").

    Raises:
        TextFileError: as ``read_bytes``, or its bytes are not UTF-8.
    """
    data = read_bytes(path, limit_bytes)
    try:
        return data.removeprefix(UTF8_BOM).decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise TextFileError(
            f"not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line})"
        ) from None


def text_sha256(text: str) -> str:
    """The sha256 (hex) of ``text`` as UTF-8: of a file ``read_text`` read, what
    ``sha256sum`` prints for it (less a byte-order mark, which ``read_text`` drops)."""
    return hashlib.sha256(text.encode()).hexdigest()


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all: into a temporary file beside it,
    then renamed over it, so a full disk or a crash leaves the file that was there (or
    none), not a truncated one. A path that is a symbolic link or exists as something
    other than a regular file (``/dev/null``, a FIFO) is written in place: renaming over
    it would replace the link or the device itself.

    Raises:
        OSError: as the writing or the rename does (the temporary file is removed).
    """
    if path.is_symlink() or (path.exists() and not path.is_file()):
        path.write_text(text)
        return
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(text)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a file"


def _size(n: int) -> str:
    return f"{n / (1 << 20):g} MiB" if n >= 1 << 20 else f"{n:,} bytes"
