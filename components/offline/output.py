"""The output folder of `gpucluster plan`: replaced only if the tool's marker proves it wrote it, swapped in atomically.

`--out DIR` is a symbolic link to a complete version of the output, kept beside it in the store `.DIR.gpucluster/`.
The store and every version in it carry the tool's marker (output_marker.py). A run makes a new version in the
store, writes it, then renames a fresh link over `DIR`: rename(2) replaces the link atomically (POSIX), so a reader
sees the old complete folder or the new complete one, never a partial or missing one. Every change to the store's
entries (a new version, the swap, removing stale versions) happens under an exclusive flock(2) on
`.DIR.gpucluster/lock`, and a version being written is flocked by its writer (`<version>.writing`) from the moment
it exists, so concurrent runs to the same folder both finish and the last one wins. The current version and the
one before it stay, for a reader that resolved the link just before the swap. A run killed before its swap leaves a
staging version that the next run removes.

Accepted as `DIR`: nothing there yet; an empty folder (replaced by the link: nothing is lost); a link this tool made
into its own store, to a version carrying its marker. Everything else is refused with one line before the plan
runs, and nothing is touched: a folder with anything in it (a project folder, `stacks/`, someone's notes, or an
earlier release's plain output folder, which carried no marker), a file, any other link, a store that is a link or
has no marker, and a link, file or unmarked folder among the store's versions. Nothing is ever followed through a
link or removed on the strength of its name alone.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gpucluster.errors import SpecError
from gpucluster.offline.output_marker import MARKER, abandoned_version, has_marker, write_marker

OPTION = "--out"
LOCK = "lock"
LOCK_WAIT_SECONDS = 10.0
"""How long a run waits for the store's lock; a run writing the same folder holds it for well under a second."""
_VERSION = re.compile(r"v-[a-z0-9_]+")  # "v-" and tempfile.mkdtemp's random letters
_LINK = re.compile(r"link-v-[a-z0-9_]+")


@dataclass(frozen=True)
class _Out:
    """What `DIR` is now: nothing, an empty folder, or the tool's link to `version`."""

    kind: Literal["absent", "empty", "link"]
    version: str | None = None


def store_of(out: Path) -> Path:
    return out.parent / f".{out.name}.gpucluster"


def _show(path: object) -> str:
    """A path for a one-line message: as is if printable, else quoted with its control characters escaped."""
    text = os.fsdecode(path) if isinstance(path, (str, bytes, os.PathLike)) else str(path)
    return text if text.isprintable() else repr(text)


def _refuse(message: str) -> SpecError:
    return SpecError.at(OPTION, message)


def output_path(given: str | None, stack: str) -> Path:
    """The output folder: `--out` as given, else out/<stack>. Refuses a name that would make the output link the
    folder holding it or one of its parents (`.`, `..`, an empty name), as a stack name even with `--out`."""
    if stack in ("", ".", "..") or "/" in stack or "\0" in stack:
        raise SpecError.at("stack", f"the stack name {stack!r} cannot name its output folder out/<stack> (it would be "
                                    "out/ itself or a parent); rename the stack file to Pulumi.<name>.yaml with a name "
                                    "of its own, such as Pulumi.dev.yaml")
    if given is None:
        return Path("out") / stack
    trimmed = given.rstrip("/")
    if os.path.basename(trimmed) in ("", ".", ".."):
        raise _refuse(f"{given!r} names no folder of its own (the output link would be that folder or a parent); "
                      "give a folder name such as out/review")
    return Path(trimmed)


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _existing_ancestor(folder: Path) -> Path:
    """The nearest folder that exists on the way to `folder` (where the output's folders will be made)."""
    for candidate in [folder, *folder.parents]:
        try:
            mode = os.stat(candidate).st_mode
        except (FileNotFoundError, NotADirectoryError):
            continue
        if not stat.S_ISDIR(mode):
            raise _refuse(f"{_show(candidate)} is a file, not a folder; give an --out whose parents are folders")
        return candidate
    return Path(".")


def _probe(folder: Path) -> None:
    """Create and remove an entry in `folder`: the only sure test that this process can write there."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".gpucluster-probe-", dir=folder))
    except OSError as error:
        raise _refuse(f"{_show(folder)} cannot be written ({error.strerror}); give an --out in a folder you can write, "
                      "or make it writable") from None


def _examine_out(out: Path) -> _Out:
    found = _lstat(out)
    if found is None:
        return _Out("absent")
    store = store_of(out)
    if stat.S_ISLNK(found.st_mode):
        target = os.readlink(out)
        match = re.fullmatch(re.escape(store.name) + r"/(" + _VERSION.pattern + r")", target)
        if match is None:
            raise _refuse(f"{_show(out)} is a link to {_show(target)}, which this tool did not make (its links point "
                          f"into {_show(store.name)}/); remove the link or give a new folder name")
        return _Out("link", match[1])
    if stat.S_ISDIR(found.st_mode):
        if not os.listdir(out):
            return _Out("empty")
        raise _refuse(f"{_show(out)} is a folder this tool did not write (it has no {MARKER} of the tool's) and would "
                      "be replaced; give a new folder name, or, if it is an earlier release's output and holds "
                      "nothing of yours, remove it first")
    raise _refuse(f"{_show(out)} is a file; give a folder name (a new one, or one this tool wrote)")


def _examine_store(store: Path, out: Path) -> bool:
    """True if the store exists and is the tool's; refuses anything else there."""
    found = _lstat(store)
    if found is None:
        return False
    if stat.S_ISLNK(found.st_mode):
        raise _refuse(f"{_show(store)} is a link; this tool keeps its versions in a folder of its own and follows no "
                      f"link there: remove the link and run again")
    if not stat.S_ISDIR(found.st_mode):
        raise _refuse(f"{_show(store)} is a file where this tool keeps its versions; remove it or give another --out")
    if not has_marker(store, "store", out.name):
        raise _refuse(f"{_show(store)} has no {MARKER} of this tool (an earlier release's store, or not the tool's): "
                      f"if it holds nothing of yours, remove it and {_show(out)}, then run again; else give another "
                      "--out")
    lock = _lstat(store / LOCK)
    if lock is not None and not stat.S_ISREG(lock.st_mode):
        raise _refuse(f"{_show(store / LOCK)} is not the plain file this tool locks; remove it and run again")
    return True


def _examine_entries(store: Path, out: Path, current: _Out) -> None:
    """Under the lock: every entry the tool would touch is of the kind it makes, and `DIR` links to a marked version."""
    for entry in sorted(os.scandir(store), key=lambda e: e.name):
        name, path = entry.name, Path(entry.path)
        found = _lstat(path)
        if found is None:
            continue
        mode = found.st_mode
        if name == MARKER or (name.endswith(".writing") and _VERSION.fullmatch(name.removesuffix(".writing"))):
            if not stat.S_ISREG(mode):
                raise _refuse(f"{_show(path)} is not the plain file this tool makes there; remove it and run again")
        elif _VERSION.fullmatch(name):
            if not stat.S_ISDIR(mode):
                raise _refuse(f"{_show(path)} is a link or a file where this tool keeps a version folder; remove it "
                              "and run again")
            if not has_marker(path, "version", out.name) and not abandoned_version(path, out.name):
                raise _refuse(f"{_show(path)} is not a version this tool wrote (no {MARKER} of its own); remove it "
                              "and run again")
        elif stat.S_ISLNK(mode) and not _LINK.fullmatch(name):
            raise _refuse(f"{_show(path)} is a link this tool did not make; remove it and run again")
    if current.version is not None and not has_marker(store / current.version, "version", out.name):
        raise _refuse(f"{_show(out)} links to {_show(store / current.version)}, which is not a version this tool "
                      f"wrote; remove {_show(out)} and run again")


def _examine_locked(out: Path, store: Path) -> _Out:
    current = _examine_out(out)
    if not _examine_store(store, out):
        raise _refuse(f"{_show(store)} disappeared while this run used it; run again")
    _examine_entries(store, out, current)
    return current


@contextlib.contextmanager
def _locked(store: Path, out: Path, wait: float | None) -> Iterator[None]:
    """The store's exclusive lock, waited for up to `wait` seconds; the kernel drops it when its holder dies."""
    limit = LOCK_WAIT_SECONDS if wait is None else wait
    path = store / LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        deadline, pause = time.monotonic() + limit, 0.001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise _refuse(f"{_show(out)} is busy: another process has held {_show(path)} for {limit:g} s (a "
                                  "run writing the same folder holds it for a moment); wait for that process to "
                                  "finish, or stop it, and run again") from None
                time.sleep(pause)  # polled, as flock(2) has no timeout; short at first, as the usual holder is quick
                pause = min(pause * 2, 0.01)
        yield
    finally:
        os.close(fd)


def _check(out: Path, wait: float | None) -> None:
    ancestor = _existing_ancestor(out.parent)
    current = _examine_out(out)
    store = store_of(out)
    has_store = _examine_store(store, out)
    if current.kind == "link" and not has_store:
        raise _refuse(f"{_show(out)} links into {_show(store)}, which is missing; remove {_show(out)} and run again")
    _probe(ancestor)
    if has_store:
        _probe(store)
        with _locked(store, out, wait):
            _examine_locked(out, store)


def check_output_folder(out: Path, wait: float | None = None) -> None:
    """Refuse, before any work, an `out` this tool may not replace or cannot write (one line, SpecError)."""
    try:
        _check(out, wait)
    except OSError as error:
        raise _refuse(f"{_show(error.filename or out)} cannot be used: {error.strerror}") from None


def _being_written(store: Path, version: str) -> bool:
    """True while a live run holds `<version>.writing` (or when that cannot be told: then the version stays)."""
    try:
        fd = os.open(store / f"{version}.writing", os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _remove_stale(store: Path, output: str, keep: set[str]) -> None:
    """Under the lock: remove this tool's versions that are neither kept nor being written, and what killed runs left.
    Only marked (or empty, abandoned) version folders, our temporary links and our unlocked lock files go."""
    for entry in sorted(os.scandir(store), key=lambda e: e.name):
        name, path = entry.name, Path(entry.path)
        with contextlib.suppress(OSError):
            if _LINK.fullmatch(name) and entry.is_symlink():
                os.unlink(path)  # a run killed between making its link and the swap
            elif (_VERSION.fullmatch(name) and name not in keep and entry.is_dir(follow_symlinks=False)
                  and not _being_written(store, name)
                  and (has_marker(path, "version", output) or abandoned_version(path, output))):
                shutil.rmtree(path)
                (store / f"{name}.writing").unlink(missing_ok=True)
            elif (name.endswith(".writing") and _VERSION.fullmatch(stem := name.removesuffix(".writing"))
                  and entry.is_file(follow_symlinks=False) and _lstat(store / stem) is None
                  and not _being_written(store, stem)):
                os.unlink(path)


def _make_store(store: Path, out: Path) -> None:
    """Create the store with its marker in one rename, so no run ever sees it unmarked."""
    if _lstat(store) is None:
        staging = Path(tempfile.mkdtemp(prefix=f"{store.name}.new-", dir=store.parent))
        try:
            write_marker(staging, "store", out.name)
            staging.chmod(0o755)
            with contextlib.suppress(OSError):
                os.rename(staging, store)  # fails if a concurrent run made it first: then that one is examined
        finally:
            if _lstat(staging) is not None:
                (staging / MARKER).unlink(missing_ok=True)
                staging.rmdir()
    if not _examine_store(store, out):
        raise _refuse(f"{_show(store)} cannot be made; check the permissions of {_show(store.parent)}")


def _new_version(store: Path, output: str) -> tuple[Path, int]:
    """Under the lock: a new marked version, and its `.writing` file flocked by this run until the run ends."""
    version = Path(tempfile.mkdtemp(prefix="v-", dir=store))
    version.chmod(0o755)
    write_marker(version, "version", output)
    fd = os.open(store / f"{version.name}.writing", os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: nobody else holds it
    return version, fd


def _discard(store: Path, out: Path, version: Path, wait: float | None) -> None:
    """Remove this run's own unfinished version; if the lock cannot be had, the next run removes it."""
    with contextlib.suppress(OSError, SpecError), _locked(store, out, wait):
        shutil.rmtree(version, ignore_errors=True)
        (store / f"link-{version.name}").unlink(missing_ok=True)
        (store / f"{version.name}.writing").unlink(missing_ok=True)


def _write_failed(out: Path, error: OSError) -> SpecError:
    where = f" ({_show(error.filename)})" if error.filename else ""
    fix = "free some space and run again" if error.errno in (errno.ENOSPC, errno.EDQUOT) else "fix that and run again"
    return _refuse(f"cannot write {_show(out)}: {error.strerror}{where}; the previous output is as it was; {fix}")


def write_output(out: Path, write: Callable[[Path], None], wait: float | None = None) -> None:
    """Write a new version with `write(folder)` and swap it in as `out`. Refuses what `check_output_folder` does;
    an OSError while writing (a full disk, say) becomes one line, with the previous output left as it was."""
    check_output_folder(out, wait)
    store = store_of(out)
    version: Path | None = None
    writing = -1
    swapped = False
    try:
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            _make_store(store, out)
            with _locked(store, out, wait):
                _examine_locked(out, store)
                version, writing = _new_version(store, out.name)
            write(version)
            with _locked(store, out, wait):
                current = _examine_locked(out, store)  # again: the folder may have changed while the plan ran
                link = store / f"link-{version.name}"
                link.symlink_to(Path(store.name) / version.name)  # relative to out's folder, where it lands
                if current.kind == "empty":
                    os.rmdir(out)  # fails, changing nothing, if anything was put there since
                os.replace(link, out)  # the atomic step
                swapped = True
                with contextlib.suppress(OSError):
                    (store / f"{version.name}.writing").unlink()
                with contextlib.suppress(OSError):
                    _remove_stale(store, out.name, keep={version.name, current.version or ""})
        except OSError as error:
            raise _write_failed(out, error) from None
    except BaseException:
        if version is not None and not swapped:
            _discard(store, out, version, wait)
        raise
    finally:
        if writing >= 0:
            os.close(writing)
