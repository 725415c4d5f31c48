"""Stack files mutated around the shipped ones, as a careless user or a fuzzer would write them.

Properties: reading and planning either succeed or end in one SpecError (never another exception), within a
bounded time; whatever is accepted passes the consumers' rules, checked here by oracles written independently
of components/spec/consumer_rules.py (the regular expressions of Kubernetes' and Azure's docs); and end to end,
the command exits 0, 1 or 2 with no traceback, under a memory cap, leaving the output folder complete.
"""

from __future__ import annotations

import copy
import re
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpucluster.errors import SpecError
from gpucluster.offline.output import MARKER, write_output
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.spec import load_stack_file
from tests.support.stacks import ROOT, STACKS

SHIPPED = {name: yaml.safe_load((STACKS / f"Pulumi.{name}.yaml").read_text()) for name in ("dev", "prod")}

NASTY: list[Any] = [
    0, -1, 1, 2**63, 10**30, 1e30, 1.5, True, False, None, "", " ", "x" * 300, "a<b", "ü", "\u202e", [], {},
    ["1", "1"], "127.0.0.0/8", "169.254.0.0/16", "224.0.0.0/4", "10.0.0.0/8", "192.168.0.0/30", "admin", "root",
    "node-role.kubernetes.io/gpu", "kubernetes.io/x", "gpucluster.io/pool", "-bad-", "a/b/c", "garbage",
    "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----", "ssh-rsa AAAA", 5000, 65537,
]
KEYS = ["labels", "taints", "tags", "zones", "count", "podsPerNode", "adminUsername", "sshPublicKeys", "hubVnetId",
        "serviceCidr", "addressSpace", "vmsPerLargeScaleSet", "members", "minCount", "name", "value", "key"]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside the cluster config."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


@st.composite
def mutated_stacks(draw: st.DrawFn) -> dict[str, Any]:
    base = copy.deepcopy(SHIPPED[draw(st.sampled_from(["dev", "prod"]))])
    cluster = base["config"]["gpucluster:cluster"]
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(cluster) if p]
        path = draw(st.sampled_from(paths))
        parent = cluster
        for part in path[:-1]:
            parent = parent[part]
        action = draw(st.sampled_from(["set", "set", "delete", "add"]))
        if action == "set":
            parent[path[-1]] = draw(st.sampled_from(NASTY) | st.text(max_size=40) | st.integers())
        elif action == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif isinstance(parent, dict):
            words = st.sampled_from([n for n in NASTY if isinstance(n, str)]) | st.text(max_size=20)
            parent[draw(st.sampled_from(KEYS))] = draw(
                st.sampled_from(NASTY) | st.dictionaries(words, words, max_size=3))
    return base


# Oracles from the consumers' documentation, independent of the library's own checks.
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")  # kubernetes.io "Labels" syntax
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_AZURE_TAG_NAME_BAD = re.compile(r"[<>%&\\?/]")


def _oracle(cluster: dict[str, Any]) -> None:
    for pool in cluster.get("pools", []):
        for key, value in (pool.get("labels") or {}).items():
            name = key.rsplit("/", 1)[-1]
            prefix = key.rsplit("/", 1)[0] if "/" in key else ""
            assert _LABEL_NAME.match(name) and _LABEL_VALUE.match(str(value)), key
            assert not prefix.endswith(("kubernetes.io", "k8s.io")) or prefix.endswith(
                ("node.kubernetes.io", "kubelet.kubernetes.io")) or key.startswith("topology.kubernetes.io/"), key
            assert not prefix.startswith("gpucluster.io"), key
        taints = [(t["key"], t.get("effect", "NoSchedule")) for t in pool.get("taints") or []]
        assert len(taints) == len(set(taints))
        assert len(set(pool.get("zones") or [])) == len(pool.get("zones") or [])
        assert 1 <= int(pool["count"]) <= 65_536
    tags = cluster.get("tags") or {}
    assert len(tags) <= 45 and all(not _AZURE_TAG_NAME_BAD.search(k) and len(v) <= 256 for k, v in tags.items())
    access = cluster.get("access") or {}
    assert str(access.get("adminUsername", "azureuser")).lower() not in {"admin", "root", "administrator", "user"}
    assert all("PRIVATE KEY" not in k for k in access.get("sshPublicKeys") or [])


@settings(max_examples=150, deadline=5000, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_stacks())
def test_mutated_stacks_plan_or_fail_with_one_line_each(tmp_path_factory: pytest.TempPathFactory,
                                                        stack: dict[str, Any]) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "Pulumi.fuzz.yaml"
    path.write_text(yaml.safe_dump(stack))
    try:
        plan_cluster(load_stack_file(path, "fuzz").spec)
    except SpecError as error:
        assert error.problems and all("\n" not in str(p) and len(str(p)) < 1000 for p in error.problems)
        return
    _oracle(stack["config"]["gpucluster:cluster"])


def _limit_memory() -> None:
    cap = 3 << 30  # the plan of prod needs well under 1 GiB
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


HOSTILE_FILES: dict[str, bytes] = {
    "count 1e30": yaml.safe_dump({"config": {"gpucluster:cluster": {
        **SHIPPED["dev"]["config"]["gpucluster:cluster"],
        "pools": [{**SHIPPED["dev"]["config"]["gpucluster:cluster"]["pools"][0], "count": 1e30}]}}}).encode(),
    "billion laughs": b"config:\n  a: &a [x,x,x,x,x,x,x,x,x,x]\n" + b"".join(
        f"  {chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n".encode() for i in range(8)),
    "utf-16": "config: {}\n".encode("utf-16"),
    "binary": bytes(range(256)) * 4,
    "deep": b"config: " + b"[" * 50_000 + b"]" * 50_000,
    "duplicate keys": b"config:\n  gpucluster:cluster: {}\n  gpucluster:cluster: {}\n",
    "50 MB tag": b"config:\n  gpucluster:cluster:\n    tags: {a: " + b"x" * 2_000_000 + b"}\n",
}


@pytest.mark.parametrize("content", list(HOSTILE_FILES.values()), ids=list(HOSTILE_FILES))
def test_hostile_stack_files_end_in_exit_2_and_leave_the_output_alone(tmp_path: Path, content: bytes) -> None:
    stack = tmp_path / "Pulumi.hostile.yaml"
    stack.write_bytes(content)
    out = tmp_path / "out"
    write_output(out, lambda folder: (folder / "preview.json").write_text("previous"))
    result = subprocess.run([sys.executable, "-m", "gpucluster.cli", "plan", str(stack), "--out", str(out)],
                            cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                            capture_output=True, text=True, timeout=120, preexec_fn=_limit_memory)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and len(result.stderr) < 4000
    assert (out / MARKER).is_file() and (out / "preview.json").read_text() == "previous"
