"""The output folder contract: never remove what the tool did not write; the old complete folder or the new
complete one, never anything else, under SIGKILL, SIGINT and concurrent runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from components.errors import SpecError
from components.offline.output import MARKER, check_output_folder, store_of, write_output
from tests.conftest import ROOT

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _plan(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "components.cli", "plan", *args], cwd=cwd, env=ENV,
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


def test_replaces_its_own_folder_and_an_earlier_releases(tmp_path: Path) -> None:
    legacy = tmp_path / "out"
    (legacy / "manifests").mkdir(parents=True)
    (legacy / "preview.json").write_text("{}")
    write_output(legacy, _writer("new"))
    assert legacy.is_symlink() and _complete(legacy) == "new"
    write_output(legacy, _writer("newer"))
    assert _complete(legacy) == "newer"
    # the current version and the one before it, nothing else
    assert len([p for p in store_of(legacy).iterdir() if p.is_dir()]) == 2
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
                seen.append(_complete(out))
            except BaseException as error:
                errors.append(error)

    reader = threading.Thread(target=read)
    reader.start()
    for i in range(1, 60):
        write_output(out, _writer(str(i)))
    done.set()
    reader.join()
    assert not errors and len(seen) > 10 and _complete(out) == "59"


_KILLED_WRITER = """
import os, signal, sys
from pathlib import Path
from components.offline.output import write_output
def write(folder):
    (folder / "preview.json").write_text("partial")
    os.kill(os.getpid(), signal.{sig})
write_output(Path(sys.argv[1]), write)
"""


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGINT"])
def test_killed_mid_write_leaves_the_old_folder_and_the_next_run_cleans_up(tmp_path: Path, sig: str) -> None:
    out = tmp_path / "out"
    write_output(out, _writer("old"))
    result = subprocess.run([sys.executable, "-c", _KILLED_WRITER.format(sig=sig), str(out)], env=ENV,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert _complete(out) == "old"
    write_output(out, _writer("new"))
    assert _complete(out) == "new"
    leftovers = sorted(p.name for p in store_of(out).iterdir())
    assert len([n for n in leftovers if n.startswith("v-") and not n.endswith(".writing")]) == 2, leftovers
    assert not [n for n in leftovers if n.startswith("link-")], leftovers


def test_ctrl_c_during_a_plan_exits_130_quietly(tmp_path: Path) -> None:
    out = tmp_path / "out"
    process = subprocess.Popen([sys.executable, "-m", "components.cli", "plan", "dev", "--out", str(out)], cwd=ROOT,
                               env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    line = process.stderr.readline()  # the first progress line: planning has started
    assert "planning stack dev" in line
    process.stderr.readline()  # the second: the program runs under the engine's event loop
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err and "interrupted" in err
    assert not out.exists() or _complete(out)


def test_two_concurrent_plans_to_one_folder_both_finish(tmp_path: Path) -> None:
    out = tmp_path / "out"
    runs = [subprocess.Popen([sys.executable, "-m", "components.cli", "plan", "dev", "--out", str(out), "--quiet"],
                             cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]
    results = [(r.wait(timeout=300), r.communicate()) for r in runs]
    assert [code for code, _ in results] == [0, 0], results
    assert all("Traceback" not in err for _, (_, err) in results)
    assert (out / MARKER).is_file() and json.loads((out / "preview.json").read_text())["steps"]
    assert len([p for p in store_of(out).iterdir() if p.is_dir()]) <= 2
