"""The marker that proves an output folder is the tool's: a small JSON file it writes into its store and into every
version it makes, naming the tool, the format, what the folder is and which `--out` it belongs to.

Only a folder carrying this marker, with exactly this content, is ever replaced or removed; names alone prove
nothing (a user's folder may hold a `preview.json` of their own). Markers are read without following links and
with a size bound, so a hostile file cannot make the check follow it elsewhere or read without end.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Literal

MARKER = ".gpucluster-output"
FORMAT = 1
_MAX_BYTES = 4096
Kind = Literal["store", "version"]


def marker_text(kind: Kind, output: str) -> str:
    return json.dumps({"tool": "gpucluster", "format": FORMAT, "kind": kind, "output": output}, sort_keys=True) + "\n"


def write_marker(folder: Path, kind: Kind, output: str) -> None:
    """Create the marker in a folder this run has just made (never over an existing file), in one write(2)."""
    fd = os.open(folder / MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, marker_text(kind, output).encode())
    finally:
        os.close(fd)


def _read(path: Path) -> bytes | None:
    """The marker file's bytes, or None if it is missing, a link, not a regular file, or too long to be one."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, _MAX_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data if len(data) <= _MAX_BYTES else None


def has_marker(folder: Path, kind: Kind, output: str) -> bool:
    """True if `folder` holds this tool's marker for `kind` of output `output`, with exactly the content it writes."""
    data = _read(folder / MARKER)
    if data is None:
        return False
    try:
        return json.loads(data) == json.loads(marker_text(kind, output))
    except (ValueError, UnicodeDecodeError):
        return False


def abandoned_version(folder: Path, output: str) -> bool:
    """True for what a run killed while creating a version leaves: an empty folder, or one holding only the start
    of its marker (empty or cut short). Removing it loses nothing."""
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    if not names:
        return True
    if names != [MARKER]:
        return False
    data = _read(folder / MARKER)
    return data is not None and marker_text("version", output).encode().startswith(data)
