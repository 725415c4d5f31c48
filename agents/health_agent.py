"""GPU health agent: runs on every GPU node (DaemonSet) and from a CronJob. Standard library only (with
kube_client.py, shipped beside it in the agents image).

  gate     init step: write "yes" to /shared/run-diag when the node still carries the preflight taint
  agent    after the DCGM diagnostic: remove the preflight taint only on a pass proven by a complete report, taint
           the node unhealthy otherwise (a failure, or a report missing, empty, cut short or unreadable); then
           watch /shared/health.json (DCGM health watches) and taint on a failure
  recheck  CronJob: put the preflight taint back on up to N idle GPU nodes and delete their agent pod, so the
           DaemonSet re-creates it and the active checks run again. Idle is read per candidate node (pods with
           `spec.nodeName=<node>`), never from a list of every pod; a node whose agent pod cannot be deleted gets
           its taint back off.
"""

from __future__ import annotations

import os
import random
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

if __package__:
    from . import kube_client as kc
else:  # the agents image: the scripts side by side in /opt/gpucluster
    import kube_client as kc  # type: ignore[no-redef]

PREFLIGHT = "gpucluster.io/preflight"
UNHEALTHY = "gpucluster.io/gpu-unhealthy"
POOL = "gpucluster.io/pool"
GPU_RESOURCE = "nvidia.com/gpu"
APP_NAME = "app.kubernetes.io/name"
SHARED = os.environ.get("SHARED_DIR", "/shared")
REPORT_LIMIT = 16 << 20
"""Bytes of a DCGM report read at most; a larger file is not a report."""
DEFAULT_WATCH_SECONDS = 60.0
WATCH_SECONDS = float(os.environ.get("HEALTH_WATCH_SECONDS", DEFAULT_WATCH_SECONDS))
API_CALLS_PER_MINUTE = 2 * 60 / DEFAULT_WATCH_SECONDS
"""At most, per node at the default interval: a GET and a PATCH of its own node each round while DCGM reports a
problem (the taint is applied again every round); nothing while healthy. The plan counts it
(components/planning/agent_load.py)."""
PROBES_PER_PICK = 5
"""Candidate nodes the recheck reads pods of, per node it may take: bounds its requests in a busy pool."""
TERMINAL = ("Succeeded", "Failed")


# Pure decisions (tested without a cluster).

def has_taint(node: dict[str, Any], key: str) -> bool:
    return any(isinstance(t, dict) and t.get("key") == key for t in _taints(node))


def _taints(node: dict[str, Any]) -> list[Any]:
    taints = _dict(node.get("spec")).get("taints")
    return taints if isinstance(taints, list) else []


def without_taint(taints: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    return [t for t in taints if t.get("key") != key]


def with_taint(taints: list[dict[str, Any]], key: str, value: str) -> list[dict[str, Any]]:
    return [*without_taint(taints, key), {"key": key, "value": value, "effect": "NoSchedule"}]


def _statuses(doc: Any) -> list[str]:
    """Every `status` string of a report (iterative: a report is data we did not write)."""
    found: list[str] = []
    stack = [doc]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            found += [v for k, v in value.items() if str(k).lower() == "status" and isinstance(v, str)]
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return found


DIAG_FAILING = frozenset({"fail", "warn"})
"""DCGM 4.5.2's JSON writes a Warn result as "Fail" (dcgmi/Diag.cpp HelperDisplayDiagResult, its default
DDR_NO_DISPLAY_WARN); a literal "Warn" (the CLI's display string) is read the same way."""
DIAG_PASSING = frozenset({"pass", "skip"})
"""A skipped test neither passes nor fails a node; a report of skips alone proves nothing."""


def diag_verdict(exit_code: int | None, report: Any) -> str:
    """`dcgmi diag -j`: "pass" only when it exited 0 AND its report is a JSON object holding at least one passed
    result, none failed or warned, and no status DCGM's JSON does not write (components/catalog/facts/dcgm_output.json, from
    NVIDIA/DCGM at the operator's release). A report that is missing, empty, cut short, without results or of skips
    alone proves nothing: the verdict is then "diag-report-invalid", never a pass."""
    statuses = [s.lower() for s in _statuses(report)] if isinstance(report, dict) else []
    if DIAG_FAILING.intersection(statuses) or (exit_code is not None and exit_code != 0):
        return "diag-failed"
    if exit_code is None or "pass" not in statuses or not DIAG_PASSING.issuperset(statuses):
        return "diag-report-invalid"
    return "pass"


def diag_passed(exit_code: int, report: Any) -> bool:
    return diag_verdict(exit_code, report) == "pass"


def health_problem(report: Any) -> str | None:
    """`dcgmi health -c -j`: the overall verdict (`body` -> `Overall Health` -> `value`: Healthy, Warning, Failure or
    Internal error at DCGM 4.5.2), or None when healthy. A Warning taints the node too: it stops taking new work
    until someone looks (the watch keeps its verdict in the taint's value)."""
    stack = [report]
    verdict = None
    while stack and verdict is None:
        doc = stack.pop()
        if isinstance(doc, dict):
            for k, v in doc.items():
                if str(k).lower() == "overall health":
                    verdict = str(v.get("value") if isinstance(v, dict) else v)
                    break
                stack.append(v)
        elif isinstance(doc, list):
            stack.extend(doc)
    if verdict is None or verdict.lower() == "healthy":
        return None
    return verdict.lower().replace(" ", "-")[:63]


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def holds_gpu(pod: dict[str, Any]) -> bool:
    """A pod that is not done and not a balloon and asks for a GPU: Running, or Pending and already bound."""
    spec, status = _dict(pod.get("spec")), _dict(pod.get("status"))
    if spec.get("priorityClassName") == "balloon" or status.get("phase") in TERMINAL:
        return False
    containers = [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
    for c in containers:
        resources = _dict(_dict(c).get("resources"))
        for kind in ("limits", "requests"):
            amount = kc.whole_number(_dict(resources.get(kind)).get(GPU_RESOURCE, 0), 0)
            if amount:
                return True
    return False


def ready(node: dict[str, Any]) -> bool:
    conditions = _dict(node.get("status")).get("conditions")
    return any(isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
               for c in (conditions if isinstance(conditions, list) else []))


def candidate(node: dict[str, Any]) -> bool:
    """Ready GPU nodes in service: not already in a check, not unhealthy, not cordoned."""
    return ready(node) and not _dict(node.get("spec")).get("unschedulable") and not has_taint(node, PREFLIGHT) \
        and not has_taint(node, UNHEALTHY)


def idle_gpu_nodes(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], limit: int) -> list[str]:
    """In-memory form of the recheck's choice (for tests on recorded objects): candidate nodes no pod but a balloon
    holds a GPU on; at most `limit`."""
    busy = {_dict(p.get("spec")).get("nodeName") for p in pods if holds_gpu(p)}
    idle = [n["metadata"]["name"] for n in nodes if n["metadata"]["name"] not in busy
            and not has_taint(n, PREFLIGHT) and not has_taint(n, UNHEALTHY)]
    random.shuffle(idle)
    return sorted(idle[:limit])


# Files the DCGM containers write.

def read_report(path: str, limit: int = REPORT_LIMIT) -> Any:
    """A JSON report, or None when missing, empty, larger than `limit`, cut short or nested absurdly deep."""
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError:
        return None
    if len(data) > limit:
        return None
    try:
        return kc.decode(data)
    except kc.ApiError:
        return None


def read_exit(path: str) -> int | None:
    try:
        with open(path) as f:
            text = f.read(32).strip()
    except OSError:
        return None
    return kc.whole_number(text, -(1 << 31), (1 << 31) - 1)  # "--1", "²", "1e999": no exit code


# Kubernetes API through the pod's service account.

def node_path(name: str) -> str:
    return f"/api/v1/nodes/{kc.segment(name)}"


def set_taints(kube: kc.Kube, name: str, change: Callable[[list[dict[str, Any]]], list[dict[str, Any]]],
               tries: int = 3) -> None:
    """Read the node, change its taints, write them with a JSON patch that first tests the resourceVersion read: a
    concurrent edit fails the patch (409/422) instead of being overwritten, and the change is read and made again."""
    for n in range(1, tries + 1):
        node = kube.get(node_path(name))
        if not isinstance(node, dict) or not isinstance(node.get("metadata"), dict):
            raise kc.ApiError(0, f"node {name}: not an object")
        taints = change([t for t in _taints(node) if isinstance(t, dict)])
        patch = [{"op": "test", "path": "/metadata/resourceVersion", "value": node["metadata"].get("resourceVersion")},
                 {"op": "add", "path": "/spec/taints", "value": taints}]
        try:
            kube.write("PATCH", node_path(name), patch, "application/json-patch+json")
            return
        except kc.ApiError as error:
            if error.status not in (409, 422) or n == tries:
                raise


def gate(kube: kc.Kube, node_name: str, shared: str = SHARED) -> int:
    node = kube.get(node_path(node_name))
    run = isinstance(node, dict) and has_taint(node, PREFLIGHT)
    with open(f"{shared}/run-diag", "w") as f:
        f.write("yes" if run else "no")
    print(f"{node_name}: preflight taint {'present, running diagnostics' if run else 'absent, skipping diagnostics'}")
    return 0


def settle_diagnostics(kube: kc.Kube, node_name: str, shared: str = SHARED) -> str | None:
    """Act on the diagnostic's result when it ran; the verdict, or None when it did not run."""
    try:
        with open(f"{shared}/run-diag") as f:
            ran = f.read(8).strip() == "yes"
    except OSError:
        ran = False
    if not ran:
        return None
    verdict = diag_verdict(read_exit(f"{shared}/diag.exit"), read_report(f"{shared}/diag.json"))
    if verdict == "pass":
        set_taints(kube, node_name, lambda t: without_taint(t, PREFLIGHT))
        print(f"{node_name}: diagnostics passed, preflight taint removed")
    else:
        # The preflight taint stays: the node takes no work until an operator or a new check clears it.
        set_taints(kube, node_name, lambda t: with_taint(t, UNHEALTHY, verdict))
        print(f"{node_name}: diagnostics {verdict}, preflight taint kept, tainted {UNHEALTHY}")
    return verdict


def watch_once(kube: kc.Kube, node_name: str, shared: str = SHARED) -> str | None:
    problem = health_problem(read_report(f"{shared}/health.json"))
    if problem:
        set_taints(kube, node_name, lambda t: with_taint(t, UNHEALTHY, problem))
        print(f"{node_name}: DCGM health {problem}, tainted {UNHEALTHY}")
    return problem


def agent(kube: kc.Kube, node_name: str, shared: str = SHARED, rounds: int | None = None,
          interval: float = WATCH_SECONDS, sleep: Callable[[float], None] = time.sleep) -> int:
    """Settle the diagnostics once, then watch every `interval`. Nothing a server or a report holds ends it: a round
    that raises anything is logged, and the next waits longer for each failed round in a row (up to 10 intervals)."""
    settled = False
    done, failures = 0, 0
    while rounds is None or done < rounds:
        try:
            if not settled:
                settle_diagnostics(kube, node_name, shared)
                settled = True
            watch_once(kube, node_name, shared)
            failures = 0
        except Exception as error:  # server data must end a round, never the agent
            failures += 1
            kc.log(f"{node_name}: {type(error).__name__}: {str(error)[:300]}; again in {interval:.0f} s or more")
        done += 1
        if rounds is None or done < rounds:
            sleep(interval if not failures else max(interval, kc.backoff_seconds(failures, interval, 10 * interval)))
    return 0


def _pods_on(kube: kc.Kube, node: str, namespace: str | None = None, selector: str | None = None,
             ) -> Iterable[dict[str, Any]]:
    query = {"fieldSelector": f"spec.nodeName={node}"}
    if selector:
        query["labelSelector"] = selector
    where = f"/api/v1/namespaces/{kc.segment(namespace)}/pods" if namespace else "/api/v1/pods"
    return kube.list_items(where, query, limit=500)


def recheck(kube: kc.Kube, pool: str, limit: int, namespace: str, app: str,
            rng: random.Random | None = None) -> int:
    """Exit 0 when every node taken was sent through the checks again (or none was idle); 1 when any failed,
    each such node left as it was found."""
    names = [n["metadata"]["name"] for n in kube.list_items("/api/v1/nodes", {"labelSelector": f"{POOL}={pool}"})
             if isinstance(n.get("metadata"), dict) and isinstance(n["metadata"].get("name"), str) and candidate(n)]
    (rng or random.Random()).shuffle(names)
    taken, failed = 0, 0
    for name in names[:max(1, limit) * PROBES_PER_PICK]:
        if taken >= limit:
            break
        try:
            if any(holds_gpu(p) for p in _pods_on(kube, name)):
                continue
            set_taints(kube, name, lambda t: with_taint(t, PREFLIGHT, "recheck"))
        except kc.ApiError as error:
            kc.log(f"{name}: not taken for a recheck: {error}")
            continue
        try:
            # A pod bound between the read and the taint would meet the diagnostics: read once more.
            if any(holds_gpu(p) for p in _pods_on(kube, name)):
                _untaint(kube, name, "a GPU pod was bound meanwhile")
                continue
            agents = list(_pods_on(kube, name, namespace, f"{APP_NAME}={app}"))
            if not agents:
                raise kc.ApiError(0, f"no {app} pod on the node")
            for pod in agents:
                kube.write("DELETE", f"/api/v1/namespaces/{kc.segment(namespace)}/pods/"
                                     f"{kc.segment(str(pod['metadata']['name']))}", None)
        except kc.ApiError as error:
            failed += 1
            _untaint(kube, name, str(error))
            continue
        taken += 1
        print(f"{name}: idle, active checks scheduled again")
    return 1 if failed else 0


def _untaint(kube: kc.Kube, name: str, why: str) -> None:
    """Undo our recheck taint (only ours: value `recheck`) so the node is not left out of service for good."""
    def undo(taints: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [t for t in taints if not (t.get("key") == PREFLIGHT and t.get("value") == "recheck")]
    try:
        set_taints(kube, name, undo, tries=5)
        kc.log(f"{name}: recheck abandoned ({why}); preflight taint removed again")
    except kc.ApiError as error:
        kc.log(f"{name}: recheck abandoned ({why}); removing the preflight taint failed too ({error}): "
               f"the node stays out of service until `kubectl taint node {name} {PREFLIGHT}-`")


def kube_from_env() -> kc.Kube:
    return kc.Kube(budget=kc.Budget(float(os.environ.get("HEALTH_KUBE_PER_MINUTE", 300))))


def main(argv: list[str]) -> int:
    mode = argv[1] if len(argv) > 1 else ""
    try:
        if mode == "gate":
            return gate(kube_from_env(), os.environ["NODE_NAME"])
        if mode == "agent":
            return agent(kube_from_env(), os.environ["NODE_NAME"])
        limit = kc.whole_number(argv[3], 0) if mode == "recheck" and len(argv) == 6 else None
        if mode == "recheck" and limit is not None:
            return recheck(kube_from_env(), argv[2], limit, argv[4], argv[5])
    except Exception as error:  # one line and exit 1 on anything a server sent, never a traceback
        kc.log(f"health-agent {mode}: {type(error).__name__}: {str(error)[:300]}")
        return 1
    kc.log("usage: health_agent.py gate | agent | recheck <pool> <limit> <namespace> <app>")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))

