"""GPU health agent: runs on every GPU node (DaemonSet) and from a CronJob. Standard library only.

  gate     init step: write "yes" to /shared/run-diag when the node still carries the preflight taint
  agent    after the DCGM diagnostic: remove the preflight taint on a pass, taint the node unhealthy on a
           failure; then watch /shared/health.json (DCGM health watches) and taint on a failure
  recheck  CronJob: put the preflight taint back on up to N idle GPU nodes and delete their agent pod,
           so the DaemonSet re-creates it and the active checks run again
"""

from __future__ import annotations

import json
import os
import random
import ssl
import sys
import time
import urllib.request
from typing import Any

HEALTH_INTERVAL_S = 60
API_CALLS_PER_MINUTE = 2 * 60 / HEALTH_INTERVAL_S
"""At most, per node: a GET and a PATCH of its own node each round while DCGM reports a problem (the taint is
applied again every round); nothing while healthy. The plan counts it (components/planning/agent_load.py)."""
PREFLIGHT = "gpucluster.io/preflight"
UNHEALTHY = "gpucluster.io/gpu-unhealthy"
SHARED = os.environ.get("SHARED_DIR", "/shared")
API = "https://kubernetes.default.svc"
SA = "/var/run/secrets/kubernetes.io/serviceaccount"


# Pure decisions (tested without a cluster).

def has_taint(node: dict[str, Any], key: str) -> bool:
    return any(t.get("key") == key for t in node.get("spec", {}).get("taints") or [])


def without_taint(taints: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    return [t for t in taints if t.get("key") != key]


def with_taint(taints: list[dict[str, Any]], key: str, value: str) -> list[dict[str, Any]]:
    return [*without_taint(taints, key), {"key": key, "value": value, "effect": "NoSchedule"}]


def _statuses(doc: Any) -> list[str]:
    if isinstance(doc, dict):
        found = [str(v) for k, v in doc.items() if k.lower() == "status" and isinstance(v, str)]
        return found + [s for v in doc.values() for s in _statuses(v)]
    if isinstance(doc, list):
        return [s for v in doc for s in _statuses(v)]
    return []


def diag_passed(exit_code: int, report: Any) -> bool:
    """`dcgmi diag -j`: passed when it exited 0 and no test reports a failure."""
    return exit_code == 0 and not any(s.lower() == "fail" for s in _statuses(report))


def health_problem(report: Any) -> str | None:
    """`dcgmi health -c -j`: the overall verdict, or None when healthy."""
    def overall(doc: Any) -> str | None:
        if isinstance(doc, dict):
            for k, v in doc.items():
                if k.lower() == "overall health":
                    return str(v.get("value") if isinstance(v, dict) else v)
                found = overall(v)
                if found:
                    return found
        return None
    verdict = overall(report)
    if verdict is None or verdict.lower() == "healthy":
        return None
    return verdict.lower().replace(" ", "-")[:63]


def idle_gpu_nodes(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], limit: int) -> list[str]:
    """Ready, untainted GPU nodes on which no running pod but a balloon holds a GPU; at most `limit`."""
    busy = set()
    for pod in pods:
        if pod.get("spec", {}).get("priorityClassName") == "balloon":
            continue
        for c in pod.get("spec", {}).get("containers", []):
            if int((c.get("resources", {}).get("limits") or {}).get("nvidia.com/gpu", 0)):
                busy.add(pod["spec"].get("nodeName"))
    idle = [n["metadata"]["name"] for n in nodes
            if n["metadata"]["name"] not in busy and not has_taint(n, PREFLIGHT) and not has_taint(n, UNHEALTHY)]
    random.shuffle(idle)
    return sorted(idle[:limit])


# Kubernetes API through the pod's service account.

def _call(method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
    with open(f"{SA}/token") as f:
        token = f.read()
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(API + path, data=data, method=method,
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": content_type})
    context = ssl.create_default_context(cafile=f"{SA}/ca.crt")
    with urllib.request.urlopen(request, context=context, timeout=30) as response:
        return json.loads(response.read() or b"null")


def _set_taints(name: str, change: Any) -> None:
    node = _call("GET", f"/api/v1/nodes/{name}")
    taints = change(node.get("spec", {}).get("taints") or [])
    # The resourceVersion test makes a concurrent edit fail instead of being overwritten.
    patch = [{"op": "test", "path": "/metadata/resourceVersion", "value": node["metadata"]["resourceVersion"]},
             {"op": "add", "path": "/spec/taints", "value": taints}]
    _call("PATCH", f"/api/v1/nodes/{name}", patch, "application/json-patch+json")


def gate(node_name: str) -> int:
    node = _call("GET", f"/api/v1/nodes/{node_name}")
    run = has_taint(node, PREFLIGHT)
    with open(f"{SHARED}/run-diag", "w") as f:
        f.write("yes" if run else "no")
    print(f"{node_name}: preflight taint {'present, running diagnostics' if run else 'absent, skipping diagnostics'}")
    return 0


def agent(node_name: str) -> int:
    with open(f"{SHARED}/run-diag") as f:
        ran = f.read().strip() == "yes"
    if ran:
        with open(f"{SHARED}/diag.exit") as f:
            code = int(f.read().strip() or 1)
        try:
            with open(f"{SHARED}/diag.json") as f:
                report = json.load(f)
        except (OSError, ValueError):
            report = None
        if diag_passed(code, report):
            _set_taints(node_name, lambda t: without_taint(t, PREFLIGHT))
            print(f"{node_name}: diagnostics passed, preflight taint removed")
        else:
            _set_taints(node_name, lambda t: with_taint(t, UNHEALTHY, "diag-failed"))
            print(f"{node_name}: diagnostics failed (exit {code}), tainted {UNHEALTHY}")
    while True:
        try:
            with open(f"{SHARED}/health.json") as f:
                problem = health_problem(json.load(f))
        except (OSError, ValueError):
            problem = None
        if problem:
            _set_taints(node_name, lambda t, p=problem: with_taint(t, UNHEALTHY, p))
            print(f"{node_name}: DCGM health {problem}, tainted {UNHEALTHY}")
        time.sleep(HEALTH_INTERVAL_S)


def recheck(pool: str, limit: int, namespace: str, app: str) -> int:
    nodes = _call("GET", f"/api/v1/nodes?labelSelector=gpucluster.io/pool%3D{pool}")["items"]
    pods = _call("GET", "/api/v1/pods?fieldSelector=status.phase%3DRunning")["items"]
    for name in idle_gpu_nodes(nodes, pods, limit):
        _set_taints(name, lambda t: with_taint(t, PREFLIGHT, "recheck"))
        agents = _call("GET", f"/api/v1/namespaces/{namespace}/pods?labelSelector=app.kubernetes.io/name%3D{app}"
                              f"&fieldSelector=spec.nodeName%3D{name}")["items"]
        for pod in agents:
            _call("DELETE", f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}")
        print(f"{name}: idle, active checks scheduled again")
    return 0


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "gate":
        sys.exit(gate(os.environ["NODE_NAME"]))
    if mode == "agent":
        sys.exit(agent(os.environ["NODE_NAME"]))
    if mode == "recheck":
        sys.exit(recheck(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]))
    sys.exit(f"unknown mode {mode}")
