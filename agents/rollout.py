"""Rollout controller: brings every node scale-set instance that Azure says is behind its scale set's model onto it,
wave by wave in the plan's order (components/planning/rollout.py; docs/operations.md, "Rolling a node image or boot
change"). Standard library only (with kube_client.py, prefix_ipam.py, rollout_arm.py and rollout_drain.py, shipped
beside it in the agents image).

What needs work is what Azure says now, never a digest of what was planned: an instance is behind when its
`latestModelApplied` is false (rollout_arm.py). The plan ConfigMap (`PLAN_CONFIGMAP`, key `plan.json`) gives only the
order and the rules: the pool waves with their scale sets, whether a pool's flavor is topology-aware and whether its
nodes run the GPU health agent, each wave's drain deadline and time estimate, and the fence. A change that leaves
every model alone (a drain deadline, a new scale set) rolls nothing; a new cluster's instances run their model
already.

A round reads the plan and the state (ConfigMap `STATE_CONFIGMAP`, key `state.json`), reactivates the Workloads it
deactivated that have left every fenced node, does at most one step and writes the state back with the
resourceVersion it read. Phases:

  scan      lifts any fence of its own left on a node (a state lost or reset); finds the first pool wave with
            instances behind and records them. Nothing behind: idle.
  fence     the behind instances' nodes get the admission label `fenced` (planning/fence.py: Kueue admits nothing new
            there and evicts nothing) and, on a pool without topology, are cordoned (nothing else keeps a
            Deployment's pod from coming back); each pod there gets the checkpoint annotation with the deadline
  drain     waits until nothing but DaemonSet and static pods runs there, or the drain deadline passes
  evict     deactivates each Workload still there (rollout_drain.py: by topology or through its pods), evicts every
            other pod through the Eviction API (a PodDisruptionBudget holds it), waits until they are gone
  move      puts the preflight taint on the nodes where the GPU health agent runs, records each instance's last ARM
            change and its node's Ready transition, and what each instance needs: `manualupgrade` alone where the
            model names another image (that replaces the OS disk), else `manualupgrade` then `reimage`
            (rollout_arm.py): one disk per change
  upgrading, reimaging
            asks ARM for the instances that have not taken it yet (an instance has when ARM shows it busy or changed
            since the recorded change), and asks again only for those still not taken `POST_GRACE_SECONDS` after it
            last asked; a failed instance stops the rollout
  health    waits for each node to be Ready again (a Ready transition after the recorded one) and, where the health
            agent runs, for its preflight taint to go; the unhealthy taint stops the rollout with the wave fenced
  lift      opens the fence and uncordons what it cordoned; back to scan

A wave that outlives its time (twice the plan's estimate from the move) stops the rollout: the nodes that came back
are opened, the ones that did not stay fenced, where NodeNotReady or NodeStuckInPreflight fires for them.

Only the holder of the Lease `LEASE` steps: the lease renews in its own thread (prefix_ipam.py `Leader.start`), and
every write is made only while it is held; a step writes at most `writes_per_round` objects so a round ends well
inside the lease. Control-plane waves are the runbook's. `PAUSE_ANNOTATION: "true"` on the plan ConfigMap holds the
controller between steps. A plan it cannot read, a state it cannot read (it starts again from a scan), an API or
ARM error: a logged round, never an exit."""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

if __package__:
    from . import kube_client as kc
    from . import rollout_drain as drain
    from .prefix_ipam import Leader
    from .rollout_arm import COMPUTE_API_VERSION, Arm, Instance
else:  # the agents image: the scripts side by side in /opt/gpucluster
    import kube_client as kc  # type: ignore[no-redef]
    import rollout_drain as drain  # type: ignore[no-redef]
    from prefix_ipam import Leader  # type: ignore[no-redef]
    from rollout_arm import COMPUTE_API_VERSION, Arm, Instance  # type: ignore[no-redef]

__all__ = ["COMPUTE_API_VERSION", "Arm", "Controller", "run"]

DEFAULT_NAMESPACE = "kube-system"
NAMESPACE = os.environ.get("ROLLOUT_NAMESPACE", DEFAULT_NAMESPACE)
LEASE = "gpucluster-rollout"
PLAN_CONFIGMAP = "gpucluster-rollout-plan"
STATE_CONFIGMAP = "gpucluster-rollout-state"
PAUSE_ANNOTATION = "gpucluster.io/rollout-paused"
CHECKPOINT = "gpucluster.io/checkpoint-by"
PREFLIGHT = "gpucluster.io/preflight"
UNHEALTHY = "gpucluster.io/gpu-unhealthy"
FENCED_BY = "gpucluster.io/fenced-by-rollout"
"""On a node the controller fenced (and CORDONED_BY where it also cordoned it): what it lifts, and only that."""
CORDONED_BY = "gpucluster.io/cordoned-by-rollout"
WORKLOADS = drain.WORKLOADS
DOMAIN_LABEL = "gpucluster.io/infiniband-domain"
RACK_LABEL = "gpucluster.io/rack"
POOL_LABEL = "gpucluster.io/pool"
SCALE_SET_LABEL = "gpucluster.io/scale-set"
POST_GRACE_SECONDS = 300.0
"""After a POST, how long instances that ARM does not yet show busy or changed are waited for before they are asked
again: an accepted request (or one whose answer was lost) shows in the instance view only once ARM has started it."""
PHASES = ("scan", "fence", "drain", "evict", "move", "upgrading", "reimaging", "health", "lift", "stopped")
MERGE = "application/merge-patch+json"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


class PlanError(Exception):
    """The plan ConfigMap is missing or unreadable: nothing is done this round."""


class StateError(Exception):
    """The state is unreadable: the controller starts again from a scan."""


class StopError(Exception):
    """The rollout stops: an operator acts (docs/operations.md)."""


class LeaseLostError(Exception):
    """The lease was lost mid-step: nothing more is written."""


def number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise PlanError(f"{what} is {value!r}, not a number of minutes")
    return float(value)


def text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise PlanError(f"{what} is {value!r}, not a name")
    return value


def check_wave(wave: Any, where: str) -> dict[str, Any]:
    """A pool wave with every field the controller uses checked; PlanError names the first bad one."""
    wave = _dict(wave)
    sets = [text(s, f"{where}.scaleSets[]") for s in _list(wave.get("scaleSets"))]
    return {"index": int(number(wave.get("index"), f"{where}.index")), "pool": text(wave.get("pool"), f"{where}.pool"),
            "scaleSets": sets, "topology": wave.get("topology") is True, "preflight": wave.get("preflight") is True,
            "drainMinutes": number(wave.get("drainMinutes", 0), f"{where}.drainMinutes"),
            "minutes": number(wave.get("minutes"), f"{where}.minutes")}


def read_plan(plan_map: dict[str, Any]) -> dict[str, Any]:
    """The plan as the controller uses it, every field checked; PlanError names the first bad one."""
    try:
        raw = json.loads(str(_dict(plan_map.get("data")).get("plan.json") or ""))
    except ValueError as error:
        raise PlanError(f"plan.json is not JSON: {error}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("waves"), list):
        raise PlanError("plan.json has no list of waves")
    fence = _dict(raw.get("fence"))
    waves = [check_wave(w, f"waves[{n}]") for n, w in enumerate(raw["waves"]) if _dict(w).get("kind") == "pool"]
    return {"waves": waves, "fence": {k: text(fence.get(k), f"fence.{k}") for k in ("label", "open", "fenced")},
            "paused": _dict(_dict(plan_map.get("metadata")).get("annotations")).get(PAUSE_ANNOTATION) == "true"}


def read_state(state_map: dict[str, Any] | None) -> dict[str, Any]:
    """The state, or StateError when it is not what this controller writes."""
    if state_map is None:
        return {"phase": "scan"}
    try:
        state = json.loads(str(_dict(state_map.get("data")).get("state.json") or "{}"))
    except ValueError as error:
        raise StateError(f"state.json is not JSON: {error}") from None
    if not isinstance(state, dict) or state.get("phase", "scan") not in PHASES:
        raise StateError(f"state.json has no known phase: {str(state)[:200]}")
    state.setdefault("phase", "scan")
    if state["phase"] not in ("scan", "stopped"):
        behind = _dict(state.get("behind"))
        if not behind or not all(isinstance(v, list) and all(isinstance(i, str) for i in v) for v in behind.values()):
            raise StateError(f"phase {state['phase']} without the instances it moves")
        try:
            state["current"] = check_wave(state.get("current"), "current")
            for field in ("deadline", "moveDeadline"):
                if field in state:
                    number(state[field], field)
        except PlanError as error:
            raise StateError(str(error)) from None
        if not all(isinstance(a, dict) and all(isinstance(i, str) for k in ("upgrade", "reimage")
                                               for i in _list(a.get(k))) for a in _dict(state.get("asked")).values()):
            raise StateError("asked is not what the controller writes")
    return state


def scale_set_of(node: dict[str, Any]) -> tuple[str, str] | None:
    """(scale set lower-cased, instance id) from a node's providerID (`azure:///subscriptions/.../
    virtualMachineScaleSets/<set>/virtualMachines/<id>`)."""
    parts = str(_dict(node.get("spec")).get("providerID") or "").split("/")
    if "virtualMachineScaleSets" not in parts:
        return None
    at = parts.index("virtualMachineScaleSets")
    if len(parts) < at + 4 or parts[at + 2] != "virtualMachines":
        return None
    return parts[at + 1].lower(), parts[at + 3]


def has_taint(node: dict[str, Any], key: str) -> bool:
    return any(_dict(t).get("key") == key for t in _list(_dict(node.get("spec")).get("taints")))


def ready(node: dict[str, Any]) -> tuple[bool, str]:
    """(Ready is True, its lastTransitionTime as the API server reports it)."""
    for c in _list(_dict(node.get("status")).get("conditions")):
        if _dict(c).get("type") == "Ready":
            return _dict(c).get("status") == "True", str(_dict(c).get("lastTransitionTime") or "")
    return False, ""


def name_of(thing: dict[str, Any]) -> str:
    return str(_dict(thing.get("metadata")).get("name"))


class Controller:
    def __init__(self, kube: kc.Kube, arm: Arm, now: Callable[[], float] = time.time,
                 leader: Leader | None = None, writes_per_round: int = 40) -> None:
        self.kube, self.arm, self.now, self.leader = kube, arm, now, leader
        self.writes_per_round = writes_per_round
        self.written = 0

    # --- the API server, every write only while the lease is held
    def _configmap(self, name: str) -> dict[str, Any] | None:
        try:
            return _dict(self.kube.get(f"/api/v1/namespaces/{kc.segment(NAMESPACE)}/configmaps/{kc.segment(name)}"))
        except kc.ApiError as error:
            if error.status == 404:
                return None
            raise

    def _write(self, method: str, path: str, body: Any, content_type: str = "application/json") -> Any:
        if self.leader is not None and not self.leader.may_write():
            raise LeaseLostError
        self.written += 1
        return self.kube.write(method, path, body, content_type)

    def _room(self) -> bool:
        return self.written < self.writes_per_round

    def _save(self, state: dict[str, Any], state_map: dict[str, Any] | None) -> None:
        path = f"/api/v1/namespaces/{kc.segment(NAMESPACE)}/configmaps"
        data = {"state.json": json.dumps(state, sort_keys=True)}
        if state_map is None:
            self._write("POST", path, {"apiVersion": "v1", "kind": "ConfigMap",
                                       "metadata": {"name": STATE_CONFIGMAP, "namespace": NAMESPACE}, "data": data})
        else:
            self._write("PUT", f"{path}/{kc.segment(STATE_CONFIGMAP)}", {**state_map, "data": data})

    def _patch_node(self, node: dict[str, Any], patch: dict[str, Any], guarded: bool = False) -> None:
        """A merge patch; `guarded` carries the resourceVersion read (a taint list is replaced whole, so a change
        since the read must fail with 409, not be overwritten)."""
        if guarded:
            version = _dict(node.get("metadata")).get("resourceVersion")
            patch = {**patch, "metadata": {**_dict(patch.get("metadata")), "resourceVersion": version}}
        self._write("PATCH", f"/api/v1/nodes/{kc.segment(name_of(node))}", patch, MERGE)

    def _patch_workload(self, workload: dict[str, Any], patch: dict[str, Any]) -> None:
        meta = drain.meta(workload)
        self._write("PATCH", f"{WORKLOADS}/namespaces/{kc.segment(str(meta.get('namespace')))}/workloads/"
                    f"{kc.segment(str(meta.get('name')))}", patch, MERGE)

    # --- what is there now
    def wave_nodes(self, state: dict[str, Any]) -> list[dict[str, Any]]:
        """The nodes of the wave's behind instances, by label (never a list of every node: the scale set's own label;
        on nodes that joined without it an InfiniBand domain's or a rack's, whose value is the scale set's name, else
        the pool's), then by providerID."""
        wave, behind = _dict(state.get("current")), _dict(state.get("behind"))
        wanted = {(s.lower(), str(i)) for s, ids in behind.items() for i in _list(ids)}
        found: dict[str, dict[str, Any]] = {}
        for scale_set in (str(s) for s in behind):
            for selector in (f"{SCALE_SET_LABEL}={scale_set}", f"{DOMAIN_LABEL}={scale_set}",
                             f"{RACK_LABEL}={scale_set}", f"{POOL_LABEL}={wave.get('pool')}"):
                nodes = [_dict(n) for n in self.kube.list_items("/api/v1/nodes", {"labelSelector": selector})
                         if (scale_set_of(_dict(n)) or ("", ""))[0] == scale_set.lower()]
                if nodes:
                    found.update((name_of(n), n) for n in nodes if scale_set_of(n) in wanted)
                    break
        return [found[name] for name in sorted(found)]

    def pods_on(self, names: list[str]) -> list[dict[str, Any]]:
        return [_dict(p) for name in names
                for p in self.kube.list_items("/api/v1/pods", {"fieldSelector": f"spec.nodeName={name}"})]

    def workloads(self) -> list[dict[str, Any]]:
        return [_dict(w) for w in self.kube.list_items(f"{WORKLOADS}/workloads")]

    # --- one round
    def step(self) -> str:
        """One round; returns what it did (for the log)."""
        self.written = 0
        if self.leader is not None and not self.leader.ensure():
            return "not the leader"
        plan_map = self._configmap(PLAN_CONFIGMAP)
        if plan_map is None:
            return f"idle: no ConfigMap {NAMESPACE}/{PLAN_CONFIGMAP}"
        try:
            plan = read_plan(plan_map)
        except PlanError as error:
            return f"idle: the plan is unreadable ({error}); fix or re-apply {PLAN_CONFIGMAP}"
        state_map = self._configmap(STATE_CONFIGMAP)
        note = ""
        try:
            state = read_state(state_map)
        except StateError as error:
            state, note = {"phase": "scan"}, f"state reset ({error}); "
        if plan["paused"]:
            return "paused"
        before = json.dumps(state, sort_keys=True)
        try:
            reactivated = self.reactivate(state, plan)
            did = self.advance(plan, state)
        except StopError as stop:
            state = {**state, "phase": "stopped", "reason": str(stop)}
            did, reactivated = f"stopped: {stop}", ""
        except LeaseLostError:
            return "lost the lease: nothing more written"
        try:
            if state_map is None or note or json.dumps(state, sort_keys=True) != before:
                self._save(state, state_map)
        except LeaseLostError:
            return "lost the lease: state not written"
        return note + reactivated + did

    def reactivate(self, state: dict[str, Any], plan: dict[str, Any]) -> str:
        """Reactivates, and unmarks in the same patch, every Workload this controller deactivated that holds no quota
        and no fenced node any more (or has finished): read from the Workloads, so a lost state loses none."""
        marked = [w for w in self.workloads() if drain.DEACTIVATED_BY in _dict(drain.meta(w).get("annotations"))]
        if not marked:
            return ""
        fenced = {name_of(_dict(n)) for n in self.kube.list_items(
            "/api/v1/nodes", {"labelSelector": f"{plan['fence']['label']}={plan['fence']['fenced']}"})}
        done = 0
        for workload in marked:
            if drain.finished(workload) or not (drain.reserved(workload) or drain.assigned_values(workload) & fenced):
                self._patch_workload(workload, {"metadata": {"annotations": {drain.DEACTIVATED_BY: None}},
                                                "spec": {"active": True}})
                done += 1
        return f"reactivated {done} of {len(marked)} workloads; " if done else ""

    def advance(self, plan: dict[str, Any], state: dict[str, Any]) -> str:
        phase = state["phase"]
        if phase == "stopped":
            return f"stopped at wave {state.get('wave')}: {state.get('reason')}"
        if phase == "scan":
            return self.scan(plan, state)
        nodes = self.wave_nodes(state)
        names = [name_of(n) for n in nodes]
        return getattr(self, f"_{phase}")(plan, state, nodes, names)

    def scan(self, plan: dict[str, Any], state: dict[str, Any]) -> str:
        fence = plan["fence"]
        stray = [n for n in (_dict(n) for n in self.kube.list_items(
            "/api/v1/nodes", {"labelSelector": f"{fence['label']}={fence['fenced']}"}))
            if FENCED_BY in _dict(_dict(n.get("metadata")).get("annotations"))]
        if stray:
            self._open(stray, fence)
            return f"opening {len(stray)} fences left from an earlier wave"
        for wave in plan["waves"]:
            behind: dict[str, list[str]] = {}
            for scale_set in wave["scaleSets"]:
                late = [i.id for i in self.arm.instances(scale_set) if not i.latest]
                if late:
                    behind[scale_set] = sorted(late, key=lambda i: (len(i), i))
            if behind:
                state.clear()
                state.update(phase="fence", wave=wave["index"], current=wave, behind=behind)
                count = sum(len(v) for v in behind.values())
                return f"wave {wave['index']}: {count} instances behind in {', '.join(behind)}"
        state.clear()
        state.update(phase="scan")
        return "idle: every instance runs its scale set's model"

    def _fence(self, plan: dict[str, Any], state: dict[str, Any], nodes: list[dict[str, Any]],
               names: list[str]) -> str:
        wave, fence = state["current"], plan["fence"]
        if "deadline" not in state:
            state["deadline"] = self.now() + float(wave["drainMinutes"]) * 60
        stamp = datetime.fromtimestamp(float(state["deadline"]), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for node in nodes:
            meta = _dict(node.get("metadata"))
            labels, annotations = _dict(meta.get("labels")), _dict(meta.get("annotations"))
            cordon = not wave["topology"] and not _dict(node.get("spec")).get("unschedulable")
            if labels.get(fence["label"]) == fence["fenced"] and FENCED_BY in annotations and not cordon:
                continue
            if not self._room():
                return f"wave {state['wave']}: fencing {len(nodes)} nodes"
            marks = {FENCED_BY: "true", **({CORDONED_BY: "true"} if cordon else {})}
            patch: dict[str, Any] = {"metadata": {"labels": {fence["label"]: fence["fenced"]}, "annotations": marks}}
            if cordon:
                patch["spec"] = {"unschedulable": True}
            self._patch_node(node, patch)
        for pod in self.pods_on(names):
            meta = drain.meta(pod)
            if drain.daemon_or_static(pod) or drain.terminal(pod) or \
                    _dict(meta.get("annotations")).get(CHECKPOINT) == stamp:
                continue
            if not self._room():
                return f"wave {state['wave']}: fenced {len(nodes)} nodes, telling their pods"
            self._write("PATCH", f"/api/v1/namespaces/{kc.segment(str(meta.get('namespace')))}/pods/"
                        f"{kc.segment(str(meta.get('name')))}", {"metadata": {"annotations": {CHECKPOINT: stamp}}},
                        MERGE)
        state["phase"] = "drain"
        return f"wave {state['wave']}: fenced {len(nodes)} nodes until {stamp}"

    def _left(self, names: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
        """(Workloads placed on the nodes, pods to evict, every pod still running there but DaemonSets' and static)."""
        pods, workloads = self.pods_on(names), self.workloads()
        running = [p for p in pods if not drain.daemon_or_static(p) and not drain.terminal(p)]
        return drain.placed(workloads, set(names), pods), drain.loose(pods, workloads), running

    def _drain(self, plan: dict[str, Any], state: dict[str, Any], nodes: list[dict[str, Any]],
               names: list[str]) -> str:
        placed, loose, running = self._left(names)
        if not running and not placed:
            state["phase"] = "move"
            return f"wave {state['wave']}: drained"
        if self.now() < float(state["deadline"]):
            return f"wave {state['wave']}: waiting for {len(placed)} workloads and {len(running)} pods"
        state["phase"] = "evict"
        return f"wave {state['wave']}: deadline passed with {len(placed)} workloads and {len(loose)} other pods"

    def _evict(self, plan: dict[str, Any], state: dict[str, Any], nodes: list[dict[str, Any]],
               names: list[str]) -> str:
        placed, loose, running = self._left(names)
        if not running and not placed:
            state["phase"] = "move"
            return f"wave {state['wave']}: drained"
        deactivated = held = 0
        for workload in placed:
            if _dict(workload.get("spec")).get("active") is False or not self._room():
                continue
            self._patch_workload(workload, {"metadata": {"annotations": {
                drain.DEACTIVATED_BY: ",".join(state["behind"])}}, "spec": {"active": False}})
            deactivated += 1
        for pod in loose:
            if not self._room():
                break
            meta = drain.meta(pod)
            try:
                self._write("POST", f"/api/v1/namespaces/{kc.segment(str(meta.get('namespace')))}/pods/"
                            f"{kc.segment(str(meta.get('name')))}/eviction", drain.eviction(pod))
            except kc.ApiError as error:
                if error.status == 429:  # a PodDisruptionBudget forbids it now
                    held += 1
                elif error.status != 404:
                    raise
        return (f"wave {state['wave']}: deactivated {deactivated} of {len(placed)} workloads, "
                f"{len(loose) - held} evictions asked, {held} held by a disruption budget, {len(running)} pods left")

    def _move(self, plan: dict[str, Any], state: dict[str, Any], nodes: list[dict[str, Any]],
              names: list[str]) -> str:
        wave = state["current"]
        asked: dict[str, Any] = {}
        for scale_set, ids in state["behind"].items():
            model = self.arm.model_image(scale_set)
            now = {i.id: i for i in self.arm.instances(scale_set)} if model is not None else {}
            targets = [now[i] for i in ids if i in now and not now[i].latest]
            if not targets:
                continue
            asked[scale_set] = {
                "upgrade": [i.id for i in targets],
                "reimage": [i.id for i in targets if i.image == model],  # the model keeps the image: a reimage
                "before": {i.id: i.changed_at for i in targets}}
        moved = {(s.lower(), i) for s, a in asked.items() for i in a["upgrade"]}
        targets = [n for n in nodes if scale_set_of(n) in moved]
        if wave["preflight"]:  # the health agent takes it off once the new boot passes its checks
            for node in targets:
                if not has_taint(node, PREFLIGHT):
                    taints = [*_list(_dict(node.get("spec")).get("taints")),
                              {"key": PREFLIGHT, "value": "rollout", "effect": "NoSchedule"}]
                    self._patch_node(node, {"spec": {"taints": taints}}, guarded=True)
        state.update(phase="upgrading", asked=asked, ready={name_of(n): ready(n)[1] for n in targets},
                     moveDeadline=self.now() + 2 * float(wave["minutes"]) * 60)
        count = sum(len(a["upgrade"]) for a in asked.values())
        return f"wave {state['wave']}: {count} instances to upgrade, " \
               f"{sum(len(a['reimage']) for a in asked.values())} then to re-image"

    def _arm_step(self, state: dict[str, Any], op: str, nodes: list[dict[str, Any]]) -> list[str]:
        """Asks ARM for `op` on the instances that have not taken it; returns those not done yet. An instance has
        taken it when ARM shows it busy or changed since the recorded change (and, for an upgrade, on its model)."""
        waiting: list[str] = []
        for scale_set, asked in _dict(state.get("asked")).items():
            before = _dict(asked.get("before"))
            now: dict[str, Instance] = {i.id: i for i in self.arm.instances(scale_set)}
            post: list[str] = []
            for instance_id in _list(asked.get(op)):
                instance = now.get(instance_id)
                if instance is None:
                    continue  # scaled in: nothing left to move
                if instance.failed:
                    raise StopError(f"{scale_set} instance {instance_id}: {op} ended in provisioningState Failed")
                taken = instance.busy or instance.changed_at != before.get(instance_id) or (
                    op == "upgrade" and instance.latest)
                if not taken:
                    post.append(instance_id)
                if not taken or instance.busy or (op == "upgrade" and not instance.latest):
                    waiting.append(f"{scale_set}/{instance_id}")
            posted = _dict(asked.get("postedAt")).get(op)
            if post and (not isinstance(posted, int | float) or self.now() - posted >= POST_GRACE_SECONDS):
                asked["postedAt"] = {**_dict(asked.get("postedAt")), op: self.now()}
                try:
                    getattr(self.arm, op)(scale_set, post)
                except kc.ApiError as error:  # it may have been taken: read again, after the grace, before asking again
                    kc.log(f"rollout: {op} of {scale_set} {post}: {error}")
        return waiting

    def _overdue(self, plan: dict[str, Any], state: dict[str, Any], nodes: list[dict[str, Any]],
                 waiting: list[str]) -> None:
        """Past the wave's time: opens the nodes that came back and stops with the ones that did not fenced."""
        if self.now() < float(state.get("moveDeadline") or 0):
            return
        stuck = set(waiting)
        back = [n for n in nodes if name_of(n) not in stuck and "/".join(scale_set_of(n) or ("", "")) not in stuck
                and not has_taint(n, PREFLIGHT) and not has_taint(n, UNHEALTHY) and ready(n)[0]]
        self._open(back, plan["fence"], everything=True)
        raise StopError(f"wave {state['wave']}: past its time, still waiting for {', '.join(sorted(stuck)[:20])}; "
                        f"{len(back)} nodes reopened, the rest stay fenced")

    def _upgrading(self, plan: dict[str, Any], state: dict[str, Any], nodes: list[dict[str, Any]],
                   names: list[str]) -> str:
        waiting = self._arm_step(state, "upgrade", nodes)
        if waiting:
            self._overdue(plan, state, nodes, waiting)
            return f"wave {state['wave']}: upgrading {len(waiting)} instances"
        for scale_set, asked in _dict(state.get("asked")).items():
            if asked.get("reimage"):
                now = {i.id: i for i in self.arm.instances(scale_set)}
                asked["before"] = {i: now[i].changed_at for i in asked["reimage"] if i in now}
        state["phase"] = "reimaging" if any(a.get("reimage") for a in state["asked"].values()) else "health"
        return f"wave {state['wave']}: upgraded"

    def _reimaging(self, plan: dict[str, Any], state: dict[str, Any], nodes: list[dict[str, Any]],
                   names: list[str]) -> str:
        waiting = self._arm_step(state, "reimage", nodes)
        if waiting:
            self._overdue(plan, state, nodes, waiting)
            return f"wave {state['wave']}: re-imaging {len(waiting)} instances"
        state["phase"] = "health"
        return f"wave {state['wave']}: re-imaged"

    def _health(self, plan: dict[str, Any], state: dict[str, Any], nodes: list[dict[str, Any]],
                names: list[str]) -> str:
        was = _dict(state.get("ready"))
        targets = [n for n in nodes if name_of(n) in was]
        sick = sorted(name_of(n) for n in targets if has_taint(n, UNHEALTHY))
        if sick:
            raise StopError(f"health check failed on {', '.join(sick)}; the wave stays fenced")
        waiting = [name_of(n) for n in targets if not ready(n)[0] or ready(n)[1] == was.get(name_of(n))
                   or (state["current"]["preflight"] and has_taint(n, PREFLIGHT))]
        if waiting:
            self._overdue(plan, state, nodes, waiting)
            return f"wave {state['wave']}: waiting for {len(waiting)} nodes to come back"
        state["phase"] = "lift"
        return f"wave {state['wave']}: healthy"

    def _lift(self, plan: dict[str, Any], state: dict[str, Any], nodes: list[dict[str, Any]],
              names: list[str]) -> str:
        if not self._open(nodes, plan["fence"]):
            return f"wave {state['wave']}: opening"
        wave = state["wave"]
        state.clear()
        state.update(phase="scan")
        return f"wave {wave}: fence lifted"

    def _open(self, nodes: list[dict[str, Any]], fence: dict[str, str], everything: bool = False) -> bool:
        """Opens the fence on nodes this controller fenced and uncordons the ones it cordoned, within the round's
        writes unless `everything`; whether it reached them all."""
        for node in nodes:
            annotations = _dict(_dict(node.get("metadata")).get("annotations"))
            if FENCED_BY not in annotations:
                continue
            if not everything and not self._room():
                return False
            patch: dict[str, Any] = {"metadata": {"labels": {fence["label"]: fence["open"]},
                                                  "annotations": {FENCED_BY: None, CORDONED_BY: None}}}
            if CORDONED_BY in annotations:
                patch["spec"] = {"unschedulable": None}
            self._patch_node(node, patch)
        return True


def run(controller: Controller, rounds: Iterator[int] | None = None, interval: float = 30.0,
        sleep: Callable[[float], None] = time.sleep) -> str:
    """Rounds for ever (or for `rounds`), the lease renewed beside them: idle or stopped it keeps reading, so a
    model change or a resumed rollout is seen; whatever a server answers is logged and the round repeated."""
    if controller.leader is not None:
        controller.leader.start()
    did = ""
    for _ in rounds if rounds is not None else iter(int, 1):
        try:
            did = controller.step()
        except kc.ApiError as error:
            did = f"error: {error}"
        except Exception as error:  # a bug must not end the Deployment's pod in a restart loop: logged, next round
            did = f"error: {type(error).__name__}: {error}"
        kc.log(f"rollout: {did}")
        sleep(interval)
    return did


def controller_from_env() -> Controller:
    lease = float(os.environ.get("ROLLOUT_LEASE_SECONDS", 30))
    per_minute = float(os.environ.get("ROLLOUT_KUBE_PER_MINUTE", 120))
    kube = kc.Kube(timeout=lease / 3, budget=kc.Budget(per_minute))
    arm_http = kc.Http(timeout=lease / 3, budget=kc.Budget(float(os.environ.get("ROLLOUT_ARM_PER_MINUTE", 30))))
    arm = Arm(arm_http, os.environ["AZURE_CLIENT_ID"], os.environ["AZURE_SUBSCRIPTION_ID"],
              os.environ["AZURE_RESOURCE_GROUP"])
    me = os.environ.get("POD_NAME") or os.uname().nodename
    leader = Leader(kube, NAMESPACE, LEASE, me, lease, lease * 2 / 3, lease / 6)
    # a round's writes take at most half the renew deadline at the budget's rate
    writes = max(1, int(per_minute / 60 * (lease * 2 / 3) / 2))
    return Controller(kube, arm, leader=leader, writes_per_round=writes)


if __name__ == "__main__":
    print(run(controller_from_env(), interval=float(os.environ.get("ROLLOUT_INTERVAL_SECONDS", 30))))
    sys.exit(0)
