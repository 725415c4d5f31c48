"""The output folder contract: never remove what the tool did not write; the old complete folder or the new
complete one, never anything else, under SIGKILL, SIGINT and concurrent runs. The hostile cases are in
test_hostile_out.py, the faults in test_output_faults.py, many concurrent writers in test_output_race.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpucluster.cli import _interrupted, main
from gpucluster.errors import SpecError
from gpucluster.offline.output import check_output_folder, store_of, write_output
from gpucluster.offline.output_marker import MARKER
from tests.support.stacks import ROOT

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _plan(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpucluster.cli", "plan", *args], cwd=cwd, env=ENV,
                          capture_output=True, text=True, timeout=300)


def _writer(text: str):
    def write(folder: Path) -> None:
        (folder / "preview.json").write_text(text)
        (folder / "manifests").mkdir()
        (folder / "manifests" / "a.yaml").write_text(text)
    return write


def _complete(out: Path) -> str:
    """The folder's content if it is a complete version, else fail."""
    assert (out / MARKER).is_file() and (out / "manifests" / "a.yaml").is_file()
    return (out / "preview.json").read_text()


@pytest.mark.parametrize("name", ["project root", "stacks", "a user folder"])
def test_refuses_folders_it_did_not_write(tmp_path: Path, name: str) -> None:
    project = tmp_path / "project"
    (project / "stacks").mkdir(parents=True)
    (project / "Pulumi.yaml").write_text("name: x\n")
    (project / "stacks" / "Pulumi.dev.yaml").write_text("config: {}\n")
    (project / "notes").mkdir()
    (project / "notes" / "todo.md").write_text("mine\n")
    target = {"project root": project, "stacks": project / "stacks", "a user folder": project / "notes"}[name]
    before = sorted(p.relative_to(project).as_posix() for p in project.rglob("*"))
    result = _plan("dev", "--out", str(target))
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "did not write" in result.stderr and "Traceback" not in result.stderr
    assert sorted(p.relative_to(project).as_posix() for p in project.rglob("*")) == before


def test_replaces_its_own_folder(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_output(out, _writer("new"))
    assert out.is_symlink() and _complete(out) == "new"
    write_output(out, _writer("newer"))
    assert _complete(out) == "newer"
    # the current version and the one before it, nothing else
    assert len([p for p in store_of(out).iterdir() if p.is_dir()]) == 2
    foreign = tmp_path / "link"
    foreign.symlink_to(tmp_path)
    with pytest.raises(SpecError, match="did not make"):
        check_output_folder(foreign)
    afile = tmp_path / "file"
    afile.write_text("x")
    with pytest.raises(SpecError, match="is a file"):
        check_output_folder(afile)


def test_a_reader_always_sees_a_complete_folder(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_output(out, _writer("0"))
    seen: list[str] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            try:
                before = os.readlink(out)
                try:
                    seen.append(_complete(out))
                except (AssertionError, OSError):
                    # A version stays until two later runs have swapped: a reader descheduled that long (a loaded
                    # machine) may find the one it resolved removed, but only once the link has moved on.
                    if os.readlink(out) == before:
                        raise
            except BaseException as error:
                errors.append(error)

    reader = threading.Thread(target=read)
    reader.start()
    for i in range(1, 60):
        write_output(out, _writer(str(i)))
    done.set()
    reader.join()
    assert not errors and len(seen) > 10 and _complete(out) == "59"


@pytest.fixture(params=["default", "ignored"])
def inherited_sigint(request: pytest.FixtureRequest) -> Iterator[None]:
    """Run the test with SIGINT at its default, and ignored, as this process and the children it starts inherit it
    under `make test &` in a shell without job control (bash(1), SIGNALS: "asynchronous commands ignore SIGINT")."""
    previous = signal.getsignal(signal.SIGINT)
    if request.param == "ignored":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _as_in_the_foreground() -> None:
    """preexec_fn: SIGINT at its default in the child, as for a command run in the foreground of a terminal, where
    Ctrl-C reaches it; the child's Python then turns it into KeyboardInterrupt, and the CLI into exit 130."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


_KILLED_WRITER = """
import os, signal, sys
from pathlib import Path
from gpucluster.offline.output import write_output
def write(folder):
    (folder / "preview.json").write_text("partial")
    os.kill(os.getpid(), signal.{sig})
write_output(Path(sys.argv[1]), write)
"""


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGINT"])
def test_killed_mid_write_leaves_the_old_folder_and_the_next_run_cleans_up(tmp_path: Path, sig: str,
                                                                         inherited_sigint: None) -> None:
    out = tmp_path / "out"
    write_output(out, _writer("old"))
    result = subprocess.run([sys.executable, "-c", _KILLED_WRITER.format(sig=sig), str(out)], env=ENV,
                            preexec_fn=_as_in_the_foreground, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert _complete(out) == "old"
    write_output(out, _writer("new"))
    assert _complete(out) == "new"
    leftovers = sorted(p.name for p in store_of(out).iterdir())
    assert len([n for n in leftovers if n.startswith("v-") and not n.endswith(".writing")]) == 2, leftovers
    assert not [n for n in leftovers if n.startswith("link-")], leftovers


def test_ctrl_c_during_a_plan_exits_130_quietly(tmp_path: Path, inherited_sigint: None) -> None:
    out = tmp_path / "out"
    process = subprocess.Popen([sys.executable, "-m", "gpucluster.cli", "plan", "dev", "--out", str(out)], cwd=ROOT,
                               env=ENV, preexec_fn=_as_in_the_foreground, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    line = process.stderr.readline()  # the first progress line: planning has started
    assert "planning stack dev" in line
    process.stderr.readline()  # the second: the program runs under the engine's event loop
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err and "interrupted" in err
    assert not out.exists() or _complete(out)


@pytest.mark.parametrize("inherited", ["default", "ignored"])
def test_the_cli_leaves_an_ignored_sigint_ignored(tmp_path: Path, inherited: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A SIGINT ignored on entry stays ignored (a background job of a shell without job control: Ctrl-C at the
    terminal is meant for the foreground only, bash(1) SIGNALS, POSIX XCU 2.11); at its default, Ctrl-C exits 130."""
    (tmp_path / "afile").write_text("mine")
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.SIG_IGN if inherited == "ignored" else signal.default_int_handler)
    try:
        code = main(["plan", "dev", "--out", str(tmp_path / "afile")])  # refused at once: a file
        handler = signal.getsignal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert code == 2 and "is a file" in capsys.readouterr().err
    assert handler is (signal.SIG_IGN if inherited == "ignored" else _interrupted)


def test_two_concurrent_plans_to_one_folder_both_finish(tmp_path: Path) -> None:
    out = tmp_path / "out"
    runs = [subprocess.Popen([sys.executable, "-m", "gpucluster.cli", "plan", "dev", "--out", str(out), "--quiet"],
                             cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]
    results = [(r.wait(timeout=300), r.communicate()) for r in runs]
    assert [code for code, _ in results] == [0, 0], results
    assert all("Traceback" not in err for _, (_, err) in results)
    assert (out / MARKER).is_file() and json.loads((out / "preview.json").read_text())["steps"]
    assert len([p for p in store_of(out).iterdir() if p.is_dir()]) <= 2
