"""What `gpucluster diff` may read of a plan folder: only regular files inside it, never through a link.

A plan folder can come from anyone (an artifact of a pull request, a colleague's tarball). `gpucluster plan`
writes only regular files and folders, so a symbolic link (`boot/` pointing at `~/.ssh`), a hard link (a
second name for a file elsewhere on the disk), a FIFO (a read that never returns) or a device is not its
output: the folder is refused before anything in it is read. The folder you name may itself be a link
(`out/<stack>` is one, to the version the tool keeps beside it); what is inside it may not.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gpucluster.errors import SpecError

REFUSAL = "a plan folder holds only the regular files `gpucluster plan` writes; plan again into a fresh folder"


def _check_entry(path: Path, real_root: Path, shown_root: Path) -> bool:
    """Raise on a link or a special file; True for a folder, False for a regular file."""
    shown = str(shown_root / path.relative_to(real_root))

    def refuse(what: str) -> SpecError:
        return SpecError.at(shown, f"{what}; {REFUSAL}")

    try:
        info = path.lstat()
    except OSError as error:
        raise SpecError.at(shown, f"cannot be read: {error.strerror}") from None
    if stat.S_ISLNK(info.st_mode):
        raise refuse(f"is a link (to {os.readlink(path)!r}), which diff does not follow")
    if not path.resolve().is_relative_to(real_root):
        raise refuse("resolves outside the plan folder")
    if stat.S_ISDIR(info.st_mode):
        return True
    if not stat.S_ISREG(info.st_mode):
        raise refuse("is not a regular file (a FIFO, socket or device)")
    if info.st_nlink > 1:
        raise refuse(f"is a hard link ({info.st_nlink} names for one file), which may be a file outside the folder")
    return False


def check_plan_folder(folder: Path, names: tuple[str, ...]) -> Path:
    """The folder's real path, after checking each of `names` in it (and everything under those that are
    folders) is a regular file or folder inside it. Missing names are skipped."""
    real_root = folder.resolve()
    for name in names:
        top = real_root / name
        if not os.path.lexists(top):
            continue
        if not _check_entry(top, real_root, folder):
            continue
        for current, folders, files in os.walk(top, followlinks=False):
            for entry in sorted(folders + files):
                _check_entry(Path(current) / entry, real_root, folder)
    return real_root
