"""Faults around the output folder of `gpucluster plan` (components/offline/output.py): a read-only parent or store,
a full disk, a write the kernel refuses, a folder held by another process. Each ends in one line and exit 2, found
before the plan runs where it can be (everything but a write that fails mid-way), and the previous output stays."""

from __future__ import annotations

import ctypes
import fcntl
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gpucluster.cli import main
from gpucluster.errors import SpecError
from gpucluster.offline import output
from gpucluster.offline.output import store_of, write_output
from tests.support.stacks import ROOT

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
_PR_CAPBSET_DROP, _CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH = 24, 1, 2  # linux/prctl.h, linux/capability.h


def _writer(text: str):
    def write(folder: Path) -> None:
        (folder / "preview.json").write_text(text)
    return write


def _versions(out: Path) -> list[str]:
    return sorted(p.name for p in store_of(out).iterdir() if p.name.startswith(("v-", "link-")))


def _bound_by_permissions() -> None:
    """preexec_fn: make permission bits bind even for root, which otherwise writes anywhere: drop the two
    capabilities that override them from the bounding set, so the program exec'd next never holds them
    (capabilities(7): a root process's permitted set after execve is its bounding set)."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH):
        if libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


def _plan_unprivileged(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([sys.executable, "-m", "gpucluster.cli", "plan", *args], cwd=cwd, env=ENV,
                              preexec_fn=_bound_by_permissions, capture_output=True, text=True, timeout=300)
    except subprocess.SubprocessError as error:
        pytest.skip(f"cannot run without the capabilities that override permissions here: {error}")


def _one_line(stderr: str, *fragments: str) -> None:
    assert stderr.count("\n") == 1 and stderr.startswith("error: --out: ") and "Traceback" not in stderr, stderr
    for fragment in fragments:
        assert fragment in stderr, (fragment, stderr)


def test_a_read_only_parent_is_refused_before_the_plan_runs(tmp_path: Path) -> None:
    parent = tmp_path / "readonly"
    parent.mkdir()
    parent.chmod(0o555)
    result = _plan_unprivileged("dev", "--out", "readonly/review", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    _one_line(result.stderr, "readonly cannot be written", "Permission denied")  # one line: no progress, no plan
    assert os.listdir(parent) == []


def test_a_read_only_store_is_refused_before_the_plan_runs(tmp_path: Path) -> None:
    out = tmp_path / "review"
    write_output(out, _writer("old"))
    before = _versions(out)
    store_of(out).chmod(0o555)
    result = _plan_unprivileged("dev", "--out", "review", cwd=tmp_path)
    store_of(out).chmod(0o755)
    assert result.returncode == 2, result.stderr
    _one_line(result.stderr, ".review.gpucluster cannot be written", "Permission denied")
    assert (out / "preview.json").read_text() == "old" and _versions(out) == before


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_disk_mid_write_is_one_line_and_the_previous_output_stays(tmp_path: Path) -> None:
    out = tmp_path / "review"
    write_output(out, _writer("old"))
    before = _versions(out)

    def fills_the_disk(folder: Path) -> None:
        (folder / "manifests").mkdir()
        (folder / "preview.json").symlink_to("/dev/full")  # every write to /dev/full fails with ENOSPC (null(4))
        (folder / "preview.json").write_text("x" * 100_000)

    with pytest.raises(SpecError) as caught:
        write_output(out, fills_the_disk)
    message = str(caught.value)
    assert "No space left on device" in message and "previous output is as it was" in message and "\n" not in message
    assert (out / "preview.json").read_text() == "old"
    assert _versions(out) == before  # this run's unfinished version removed, the old one kept


def test_a_write_the_kernel_refuses_mid_plan_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """The whole plan, with a file-size limit (setrlimit(2) RLIMIT_FSIZE) that its preview.json exceeds: write(2)
    fails with EFBIG mid-way, as it fails with ENOSPC on a full disk."""
    out = tmp_path / "review"
    write_output(out, _writer("old"))
    before = _versions(out)

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))

    result = subprocess.run([sys.executable, "-m", "gpucluster.cli", "plan", "dev", "--out", str(out), "--quiet"],
                            cwd=ROOT, env=ENV, preexec_fn=small_files, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    _one_line(result.stderr, "File too large", "previous output is as it was")
    assert (out / "preview.json").read_text() == "old" and _versions(out) == before


def test_a_folder_held_by_another_process_is_refused_before_the_plan_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "review"
    write_output(out, _writer("old"))
    monkeypatch.setattr(output, "LOCK_WAIT_SECONDS", 0.3)
    planned: list[object] = []

    def plan_checked(spec: object) -> None:
        planned.append(spec)
        raise RuntimeError("the plan ran")

    monkeypatch.setattr("gpucluster.simulation.check.plan_checked", plan_checked)
    previous = signal.getsignal(signal.SIGINT)
    with open(store_of(out) / "lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # as `flock .review.gpucluster/lock sleep 600` would
        release = threading.Timer(30, fcntl.flock, (held, fcntl.LOCK_UN))  # lets a run that waits for ever finish
        release.start()
        try:
            code = main(["plan", "dev", "--out", str(out)])
        finally:
            release.cancel()
            signal.signal(signal.SIGINT, previous)
    err = capsys.readouterr().err
    assert code == 2, err
    _one_line(err, "is busy", "lock", "wait for that process to finish")
    assert planned == []  # refused after the bounded wait, before the plan
    assert (out / "preview.json").read_text() == "old"


def test_a_lock_held_for_a_moment_is_waited_for(tmp_path: Path) -> None:
    out = tmp_path / "review"
    write_output(out, _writer("old"))
    with open(store_of(out) / "lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        started = time.monotonic()  # before the timer starts: the lock is released no sooner than 0.3 s after this
        threading.Timer(0.3, fcntl.flock, (held, fcntl.LOCK_UN)).start()
        write_output(out, _writer("new"), wait=60)
    assert time.monotonic() - started >= 0.3 and (out / "preview.json").read_text() == "new"
