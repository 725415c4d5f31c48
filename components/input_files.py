"""Reading a user's file with its cost fixed before the first byte: at most `limit` + 1 bytes are read, so a
file past its cap costs the cap, not its size (read whole first, a 3 GB stack file cost 3.1 GB before its
size was checked). Caps per kind of file are listed in docs/operations.md, "Input bounds"."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any

from gpucluster.errors import SpecError

KIB, MIB = 1 << 10, 1 << 20


def size_text(size: int) -> str:
    return f"{size // MIB} MiB" if size >= MIB and size % MIB == 0 else f"{size // KIB} KiB"


def read_bounded(path: Path, limit: int, what: str, follow_links: bool = True) -> bytes:
    """The bytes of `path`, a regular file of at most `limit` bytes, or a SpecError naming the file.

    Opened without blocking, so a FIFO or device named by mistake is refused instead of read forever;
    with `follow_links` false a symbolic link is refused (O_NOFOLLOW)."""
    where = str(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        descriptor = os.open(path, flags)
    except FileNotFoundError:
        raise SpecError.at(where, f"no such file; give the {what}") from None
    except OSError as error:
        if error.errno == errno.ELOOP and not follow_links:
            raise SpecError.at(where, f"is a symbolic link; give the {what} itself") from None
        raise SpecError.at(where, f"cannot be opened ({error.strerror}); give the {what}") from None
    mode = os.fstat(descriptor).st_mode  # before fdopen, which refuses a folder with IsADirectoryError
    if not stat.S_ISREG(mode):
        os.close(descriptor)
        kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
        raise SpecError.at(where, f"is {kind}; give the {what}")
    with os.fdopen(descriptor, "rb") as handle:
        try:
            data = handle.read(limit + 1)
        except OSError as error:
            raise SpecError.at(where, f"cannot be read ({error.strerror})") from None
    if len(data) > limit:
        raise SpecError.at(where, f"is larger than {size_text(limit)}, the most a {what} may hold "
                                  "(docs/operations.md, \"Input bounds\")")
    return data


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (RFC 8259 has no NaN or Infinity)")


def load_json(data: bytes, where: str, what: str) -> Any:
    """JSON as RFC 8259 defines it (and Go's encoding/json reads it): UTF-8, no NaN or Infinity, numbers Python can
    hold. Every problem is one SpecError line naming `where`, never a traceback."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise SpecError.at(where, f"is not UTF-8 text (byte {error.start}); give the {what}") from None
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as error:
        raise SpecError.at(where, f"not valid JSON at line {error.lineno}, column {error.colno}: {error.msg}") from None
    except RecursionError:  # the C decoder counts nesting against the recursion limit and raises, never crashes
        raise SpecError.at(where, f"is nested too deeply to be a {what}") from None
    except ValueError as error:  # NaN/Infinity above, or an integer past Python's 4,300-digit conversion limit
        raise SpecError.at(where, f"not valid JSON: {str(error)[:120]}") from None
