"""Concurrent runs writing one output folder (components/offline/output.py): every run finishes, and a reader
always sees a complete version. Many writers start at once, round after round, so that one run's clean-up meets
another run's new version at every step of its making."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import re
import threading
import time
from collections.abc import Callable
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

from gpucluster.offline.output import store_of, write_output
from gpucluster.offline.output_marker import MARKER

WRITERS, ROUNDS = 4, 60


def _version(text: str) -> Callable[[Path], None]:
    def write(folder: Path) -> None:
        (folder / "preview.json").write_text(text)
        (folder / "manifests").mkdir()
        (folder / "manifests" / "a.yaml").write_text(text)
    return write


def _write_rounds(out: Path, barrier: Barrier, index: int, failures: Queue) -> None:
    """One writer process: ROUNDS writes, each started with the others (the barrier) after a random pause of up
    to 2 ms, so that starts land anywhere in the other runs' swap and clean-up."""
    rng = random.Random(index)
    for round_ in range(ROUNDS):
        barrier.wait()
        time.sleep(rng.random() * 0.002)
        try:
            write_output(out, _version(f"{index}-{round_}"))
        except BaseException as error:
            failures.put(f"writer {index} round {round_}: {type(error).__name__}: {error}")


def _read_until(out: Path, done: threading.Event, seen: list[str], errors: list[str]) -> None:
    """Each file is opened through the link, as a user's tool opens it: it is there, whole, in a version carrying
    the tool's marker. A version stays until two later runs have swapped and this reader holds none across reads,
    so a read the writers outran (a loaded machine) may fail, but only once the link has moved on: a failed read
    while the link still names the version it started with is an error."""
    while not done.is_set():
        try:
            before = os.readlink(out)
        except OSError as error:
            errors.append(f"the link: {type(error).__name__}: {error}")
            continue
        preview = ""
        try:
            marker = json.loads((out / MARKER).read_text())
            preview = (out / "preview.json").read_text()
            manifest = (out / "manifests" / "a.yaml").read_text()
            problem = "" if marker.get("kind") == "version" and re.fullmatch(r"\d+-\d+", preview) \
                and re.fullmatch(r"\d+-\d+", manifest) else f"incomplete: {marker} {preview!r} {manifest!r}"
        except (OSError, ValueError) as error:
            problem = f"{type(error).__name__}: {error}"
        if not problem:
            seen.append(preview)
        elif _link(out) in (before, None):
            errors.append(problem)
        time.sleep(0.0002)  # leave the writers most of a core


def _link(out: Path) -> str | None:
    try:
        return os.readlink(out)
    except OSError:
        return None


def test_many_concurrent_writers_all_finish_and_a_reader_sees_complete_versions(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_output(out, _version("0-0"))
    context = multiprocessing.get_context("fork")  # before the reader thread starts: no thread is forked
    barrier, failures = context.Barrier(WRITERS), context.Queue()
    writers = [context.Process(target=_write_rounds, args=(out, barrier, i, failures)) for i in range(WRITERS)]
    for writer in writers:
        writer.start()
    seen: list[str] = []
    errors: list[str] = []
    done = threading.Event()
    reader = threading.Thread(target=_read_until, args=(out, done, seen, errors))
    reader.start()
    for writer in writers:
        writer.join(timeout=120)
    done.set()
    reader.join()
    reported: list[str] = []
    while not failures.empty():
        reported.append(failures.get())
    assert [w.exitcode for w in writers] == [0] * WRITERS
    assert not reported, f"{len(reported)} of {WRITERS * ROUNDS} writes failed: {reported[:3]}"
    assert not errors, f"{len(errors)} of {len(seen) + len(errors)} reads failed: {errors[:3]}"
    assert len(seen) > 50
    store = sorted(p.name for p in store_of(out).iterdir())
    # the current version and the one before it; no lock file of a finished run, no temporary link
    assert len([n for n in store if n.startswith("v-")]) == 2, store
    assert not [n for n in store if n.endswith(".writing") or n.startswith("link-")], store
