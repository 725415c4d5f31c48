"""Random previews fed to `gpucluster check` (with and without `--stack`) and `gpucluster diff`, in a process under a
1.5 GiB address-space limit (resource.setrlimit RLIMIT_AS): every run exits 0, 1 or 2, nothing escapes as a
traceback and no MemoryError occurs.

The previews are the one `gpucluster plan dev` writes (tests/data/previews/dev.json) mutated (values of other JSON
types, deleted fields, nesting, repetition, Pulumi's unknown and secret placeholders), and generated junk. Few
examples (the fuzz found its crash sites once; these keep them found) and one large generated document.
"""

from __future__ import annotations

import copy
import json
import os
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.support.stacks import ROOT

DEV_PREVIEW = ROOT / "tests" / "data" / "previews" / "dev.json"
SEED: dict[str, Any] = json.loads(DEV_PREVIEW.read_text())
MEMORY_LIMIT = 3 << 29  # 1.5 GiB of address space: the interpreter and its imports take about 300 MB of it
EXITS = {0, 1, 2}

SCALARS = (st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False)
           | st.text(max_size=12) | st.sampled_from([
               "04da6b54-80e4-46f7-96ec-b56ff0331ba9", "[secret]", "[unknown]", "", "x" * 500, "urn:pulumi:dev",
               "urn:pulumi:../x::gpucluster::t::n", "azure-native:compute:VirtualMachineScaleSet", "create", "delete",
               "-1", "1e400", "gpu", "apiserver", "etcd", "true"]))
JUNK = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=8) | st.sampled_from(["urn", "type", "inputs", "tags", "sku"]),
                                      inner, max_size=4), max_leaves=12)


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


@pytest.fixture(scope="module")
def worker() -> Iterator[subprocess.Popen[str]]:
    """One `gpucluster` process under the memory limit for all examples (tests/support/cli_worker.py)."""
    env = {"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    process = subprocess.Popen([sys.executable, "-m", "tests.support.cli_worker"], cwd=ROOT, env=env, text=True,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               preexec_fn=_limit_memory)
    yield process
    assert process.stdin is not None
    process.stdin.close()
    process.wait(timeout=60)
    assert process.stderr is not None
    assert "Traceback" not in process.stderr.read()


def _run(worker: subprocess.Popen[str], *args: str) -> dict[str, Any]:
    assert worker.stdin is not None and worker.stdout is not None
    worker.stdin.write(json.dumps(list(args)) + "\n")
    worker.stdin.flush()
    line = worker.stdout.readline()
    assert line, "the worker died (out of memory?)"
    return json.loads(line)


def _judge(worker: subprocess.Popen[str], path: Path) -> None:
    for args in (["check", str(path)], ["check", str(path), "--stack", "dev"], ["diff", str(path), str(DEV_PREVIEW)],
                 ["diff", str(DEV_PREVIEW), str(path)]):
        result = _run(worker, *args)
        assert result["traceback"] is None, result["traceback"]
        assert result["exit"] in EXITS, result
        assert "Traceback" not in result["stderr"] and "MemoryError" not in result["stderr"], result["stderr"]


def _nodes(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _nodes(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _nodes(item, (*path, index))


def _paths(document: dict[str, Any], draw: st.DrawFn) -> tuple[Any, ...]:
    """A path into the document, most often into one step (a whole-document walk would favour the big ones)."""
    steps = document.get("steps")
    if isinstance(steps, list) and steps and draw(st.booleans()):
        index = draw(st.integers(0, len(steps) - 1))
        inner = list(_nodes(steps[index], ("steps", index)))
        return draw(st.sampled_from(inner))
    return draw(st.sampled_from(list(_nodes(document))[:400]))


@st.composite
def mutated_previews(draw: st.DrawFn) -> dict[str, Any]:
    document = copy.deepcopy(SEED)
    for _ in range(draw(st.integers(1, 4))):
        path = _paths(document, draw)
        if not path:
            continue
        parent: Any = document
        for part in path[:-1]:
            parent = parent[part]
        key = path[-1]
        action = draw(st.sampled_from(["replace", "replace", "delete", "nest", "repeat", "another stack"]))
        if action == "replace":
            parent[key] = draw(JUNK)
        elif action == "delete" and isinstance(parent, dict):
            del parent[key]
        elif action == "nest":
            value = parent[key]
            for _ in range(draw(st.integers(1, 80))):
                value = [value] if draw(st.booleans()) else {"n": value}
            parent[key] = value
        elif action == "repeat":
            parent[key] = [copy.deepcopy(parent[key]) for _ in range(draw(st.integers(2, 50)))]
        elif isinstance(parent[key], str) and parent[key].startswith("urn:pulumi:dev::"):
            parent[key] = parent[key].replace("urn:pulumi:dev::", "urn:pulumi:prod::", 1)
    return document


def _seed_with(change: Any) -> dict[str, Any]:
    document = copy.deepcopy(SEED)
    change(document)
    return document


def _scale_set(document: dict[str, Any]) -> dict[str, Any]:
    return next(s["newState"] for s in document["steps"] if s["newState"]["type"].endswith("VirtualMachineScaleSet"))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(document=mutated_previews())
@example(document=_seed_with(lambda d: _scale_set(d)["inputs"].update(sku=["Standard_D4s_v5"])))  # found crashing diff
@example(document=_seed_with(lambda d: d["steps"][0]["newState"].update(dependencies=3)))  # found crashing check
def test_mutated_previews_exit_0_1_or_2_without_a_traceback(worker: subprocess.Popen[str],
                                                             tmp_path_factory: pytest.TempPathFactory,
                                                             document: dict[str, Any]) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "preview.json"
    path.write_text(json.dumps(document))
    _judge(worker, path)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(document={"steps": [{"op": "create", "urn": "urn:pulumi:dev::p::t::n", "newState": {
    "type": "t", "custom": True, "inputs": {}, "dependencies": 5}}]})  # found crashing check
@given(document=JUNK | st.fixed_dictionaries({"steps": JUNK}) | st.fixed_dictionaries(
    {"steps": st.lists(st.fixed_dictionaries({"op": SCALARS, "urn": SCALARS, "newState": JUNK}), max_size=3)}))
def test_junk_exits_0_1_or_2_without_a_traceback(worker: subprocess.Popen[str], tmp_path_factory: pytest.TempPathFactory,
                                                 document: Any) -> None:
    path = tmp_path_factory.mktemp("junk") / "preview.json"
    path.write_text(json.dumps(document))
    _judge(worker, path)


def test_a_large_deep_preview_stays_within_the_memory_limit(tmp_path: Path) -> None:
    """40 MB of lists nested 90 deep: the shape that once grew past 16 GB. Read whole and proxied it runs out of the
    1.5 GiB; bounded, it is refused at the size cap in its own process."""
    path = tmp_path / "deep.json"
    urn = "urn:pulumi:dev::gpucluster::azure-native:network:VirtualNetwork::vnet"
    lists = "[" * 90 + "[" + ",".join(["[]"] * 13_000_000) + "]" + "]" * 90
    path.write_text(json.dumps({"steps": [{"op": "create", "urn": urn, "newState": {
        "urn": urn, "type": "azure-native:network:VirtualNetwork", "custom": True, "inputs": {"x": None}}}]})
        .replace("null", lists))
    env = {"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    for args in (["check", str(path)], ["diff", str(path), str(DEV_PREVIEW)]):
        result = subprocess.run([sys.executable, "-m", "gpucluster.cli", *args], cwd=ROOT, env=env, text=True,
                                capture_output=True, timeout=120, preexec_fn=_limit_memory)
        assert result.returncode == 2, result.stderr[-2000:]
        assert "is larger than 32 MiB" in result.stderr
        assert "Traceback" not in result.stderr and "MemoryError" not in result.stderr
