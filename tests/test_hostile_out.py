"""`gpucluster plan --out`: what is accepted as the tool's own output folder and what is refused, one case per file in
tests/data/hostile_out/. Each case builds a tree in an empty working folder: user files, links, stores and markers.

A refused case runs `gpucluster plan` and must end in exit 2 with one line naming the path, before the plan runs,
with every file, folder and link of the tree exactly as it was (nothing removed, nothing followed). An accepted case
writes an output and must leave the link to a version carrying the tool's marker, the named user files untouched
and the named leftovers of earlier runs gone.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from gpucluster.cli import main
from gpucluster.offline.output import store_of, write_output
from gpucluster.offline.output_marker import MARKER, has_marker, marker_text
from tests.support.stacks import ROOT

CASES = ROOT / "tests" / "data" / "hostile_out"
OUT = "review"


def _build(root: Path, tree: list[dict[str, Any]]) -> None:
    for entry in tree:
        path = root / entry["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        if "file" in entry:
            path.write_text(entry["file"])
        elif "dir" in entry:
            path.mkdir()
        elif "link" in entry:
            path.symlink_to(entry["link"].replace("{root}", str(root)))
        elif "marker" in entry:
            path.write_text(marker_text(entry["marker"], entry.get("output", OUT)))
        elif "stack" in entry:
            path.write_bytes((ROOT / "stacks" / f"Pulumi.{entry['stack']}.yaml").read_bytes())
        else:
            raise ValueError(f"unknown entry {entry}")


def _snapshot(root: Path) -> dict[str, str]:
    """Every entry under `root`, links not followed: a folder, a link and its target, or a file and its bytes."""
    seen: dict[str, str] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            key = path.relative_to(root).as_posix()
            if path.is_symlink():
                seen[key] = f"link -> {os.readlink(path)}"
            elif path.is_dir():
                seen[key] = "folder"
            else:
                seen[key] = f"file {path.read_bytes()!r}"
    return seen


def _cases() -> list[Any]:
    return [pytest.param(json.loads(path.read_text()), id=path.stem) for path in sorted(CASES.glob("*.json"))]


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    monkeypatch.chdir(root)
    return root


def _plan(args: list[str]) -> int:
    """`gpucluster plan` in this process (a refusal returns before the plan runs); SIGINT restored after."""
    previous = signal.getsignal(signal.SIGINT)
    try:
        return main(args)
    finally:
        signal.signal(signal.SIGINT, previous)


def test_there_are_cases() -> None:
    assert len(_cases()) >= 25


@pytest.mark.parametrize("case", _cases())
def test_output_folder_case(case: dict[str, Any], sandbox: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _build(sandbox, case["tree"])
    before = _snapshot(sandbox)
    if "refused" in case:
        code = _plan(case.get("args", ["plan", "dev", "--out", OUT]))
        err = capsys.readouterr().err
        assert code == 2, err
        assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err, err
        for fragment in case["refused"]:
            assert fragment in err, (fragment, err)
        assert _snapshot(sandbox) == before
        return
    out = sandbox / OUT

    def write(folder: Path) -> None:
        (folder / "preview.json").write_text('{"steps": []}\n')

    write_output(out, write)
    target = out.parent / os.readlink(out)
    assert target.parent == store_of(out) and (out / "preview.json").read_text() == '{"steps": []}\n'
    assert has_marker(store_of(out), "store", OUT) and has_marker(target, "version", OUT)
    for kept in case["accepted"]["kept"]:
        assert before[kept] == _snapshot(sandbox)[kept], kept
    for gone in case["accepted"]["gone"]:
        assert not os.path.lexists(sandbox / gone), gone
    assert json.loads((target / MARKER).read_text())["tool"] == "gpucluster"
