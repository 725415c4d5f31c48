"""Each staged Kubernetes object waits for its own namespace and the service accounts in it
(components/kubernetes/declare.py `declare_staged`), not for every namespace of its batch: with n teams that was n x n
recorded dependencies (500 teams: a 100 MB preview and four times the memory)."""

from __future__ import annotations

import copy
from collections import Counter

import yaml

from gpucluster.offline.engine import Registration, run_program
from tests.support.stacks import ROOT, STACKS

NAMESPACE = "kubernetes:core/v1:Namespace"


def _run_with_teams(teams: int) -> list[Registration]:
    document = yaml.safe_load((STACKS / "Pulumi.dev.yaml").read_text(encoding="utf-8"))
    config = copy.deepcopy(document["config"])
    cluster = config["gpucluster:cluster"]
    cluster["teams"] = [cluster["teams"][0], *({"name": f"team-{i}", "quota": {"gpus": 0}} for i in range(1, teams))]
    return run_program(ROOT / "__main__.py", "gpucluster", "dev", config).registrations


def test_a_namespaced_object_waits_for_its_own_namespace_only() -> None:
    registrations = _run_with_teams(4)
    namespaces = {r.urn: (r.inputs.get("metadata") or {}).get("name") for r in registrations if r.type == NAMESPACE}
    checked: Counter[str] = Counter()
    for r in registrations:
        if not r.type.startswith("kubernetes:") or r.type == NAMESPACE:
            continue
        own = (r.inputs.get("metadata") or {}).get("namespace")
        waits_for = {namespaces[d] for d in r.dependencies if d in namespaces}
        assert waits_for <= {own}, f"{r.urn} waits for namespaces {sorted(map(str, waits_for))}, not only its own {own}"
        checked[r.type.rsplit(":", 1)[1]] += bool(waits_for)
    assert checked["LocalQueue"] >= 4 and checked["ServiceAccount"] > 0  # each team's queues wait for its namespace


def test_dependencies_grow_with_the_teams_not_their_square() -> None:
    few, many = (sum(len(r.dependencies) for r in _run_with_teams(n)) for n in (4, 24))
    per_team = (many - few) / 20
    assert per_team < 20, f"{per_team:.0f} more recorded dependencies per team"
