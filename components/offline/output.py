"""The output folder of `gpucluster plan`: replaced only if the tool wrote it, swapped in atomically.

`--out DIR` is a symbolic link to a complete version of the output, kept beside it in `.DIR.gpucluster/`.
A run writes a new version into that store, then renames a fresh link over `DIR`: rename(2) replaces the
link atomically (POSIX), so a reader sees the old complete folder or the new complete one, never a
partial or missing one. The swap and the clean-up of stale versions run under an exclusive lock on
`.DIR.gpucluster/lock`, so concurrent runs to the same folder both finish and the last one wins.
A run killed before its swap leaves only a staging folder in the store, which the next run removes.

Nothing else is ever removed: an existing `DIR` that is not such a link (a project folder, `stacks/`,
someone's notes) is refused, with one exception: a folder holding only what earlier releases of this tool
wrote there (`preview.json` and its siblings, and nothing else) is recognised and replaced.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from components.errors import SpecError

MARKER = ".gpucluster-output"
"""A file in every version the tool writes; its presence is how a version is recognised."""
_OUTPUT_NAMES = frozenset({"preview.json", "summary.json", "report.html", "manifests", "charts", "boot", MARKER})
"""What the tool writes into an output folder, in this and earlier releases."""


def store_of(out: Path) -> Path:
    return out.parent / f".{out.name}.gpucluster"


def _link_target(out: Path) -> Path:
    target = Path(os.readlink(out))
    return target if target.is_absolute() else out.parent / target


def _is_ours(out: Path) -> bool:
    """True if `out` is a link into its own store, or a folder holding only earlier releases' output."""
    if out.is_symlink():
        return _link_target(out).parent == store_of(out)
    if not out.is_dir():
        return False
    names = {entry.name for entry in out.iterdir()}
    return "preview.json" in names and names <= _OUTPUT_NAMES


def check_output_folder(out: Path, option: str = "--out") -> None:
    """Refuse, before any work, an `out` this tool may not replace."""
    if out.is_symlink():
        if not _is_ours(out):
            raise SpecError.at(option, f"{out} is a link this tool did not make; give a new folder name")
        return
    if not out.exists():
        return
    if not out.is_dir():
        raise SpecError.at(option, f"{out} is a file; give a folder name (a new one, or one this tool wrote)")
    if any(out.iterdir()) and not _is_ours(out):
        raise SpecError.at(option, f"{out} holds files this tool did not write and would replace them all; "
                                   "give a new folder name (the plan writes a folder of its own)")


@contextlib.contextmanager
def _flock(path: Path, *, blocking: bool = True) -> Iterator[bool]:
    """An exclusive flock(2) on `path`; yields False if `blocking` is off and another process holds it.
    The kernel drops the lock when its holder dies, even by SIGKILL."""
    with open(path, "a", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _remove_stale(store: Path, keep: set[str]) -> None:
    """Remove versions that are neither kept nor still being written (their writer holds `<version>.writing`)."""
    for entry in store.iterdir():
        if not entry.name.startswith("v-") or entry.suffix == ".writing" or entry.name in keep:
            continue
        writing = store / f"{entry.name}.writing"
        with _flock(writing, blocking=False) as free:
            if not free:
                continue  # another run is writing this version
            shutil.rmtree(entry, ignore_errors=True)
            writing.unlink(missing_ok=True)
    for entry in store.glob("link-*"):
        entry.unlink(missing_ok=True)  # a run killed between making its link and the swap
    for entry in store.glob("v-*.writing"):
        if not (store / entry.stem).exists():
            with _flock(entry, blocking=False) as free:
                if free:
                    entry.unlink(missing_ok=True)


def write_output(out: Path, write: Callable[[Path], None]) -> None:
    """Write a new version with `write(folder)` and swap it in as `out`; refuses what `check_output_folder` does."""
    check_output_folder(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    store = store_of(out)
    store.mkdir(exist_ok=True)
    version = Path(tempfile.mkdtemp(prefix="v-", dir=store))
    writing = store / f"{version.name}.writing"
    try:
        with _flock(writing):
            version.chmod(0o755)
            write(version)
            (version / MARKER).write_text("written by gpucluster plan; replaced as a whole by the next run\n",
                                          encoding="utf-8")
            with _flock(store / "lock"):
                check_output_folder(out)  # again: the folder may have changed while the plan ran
                previous = _link_target(out).name if out.is_symlink() else None
                link = store / f"link-{version.name}"
                link.symlink_to(Path(store.name) / version.name)  # relative to out's folder, where it lands
                if out.is_dir() and not out.is_symlink():
                    # an earlier release's plain folder (checked above to hold only its output)
                    out.rename(store / f"v-old-{version.name}")
                os.replace(link, out)  # the atomic step
                writing.unlink(missing_ok=True)
                # the previous version stays, for a reader that resolved the link just before the swap
                _remove_stale(store, keep={version.name, previous or ""})
    except BaseException:
        shutil.rmtree(version, ignore_errors=True)
        writing.unlink(missing_ok=True)
        raise
