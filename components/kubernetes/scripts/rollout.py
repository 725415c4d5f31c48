"""Rollout controller: drives the plan's node waves (components/planning/rollout.py) one after another. Standard
library only (with kube_client.py, shipped beside it in the agents image).

Each round reads the plan (ConfigMap `PLAN_CONFIGMAP`, key `plan.json`: the waves, the fence and the drain deadline)
and the state (ConfigMap `STATE_CONFIGMAP`, key `state.json`: wave, phase, deadline), does at most one step and
writes the state back with the resourceVersion it read, so a restarted controller resumes where the last write left
it and a stale writer gets 409. A wave goes through:

  fence    every node of the wave's scale sets gets the admission label `fenced` (planning/fence.py: Kueue admits
           nothing new there and evicts nothing); each running pod there gets the checkpoint annotation with the
           deadline; the deadline is recorded
  drain    waits until no Kueue Workload admitted onto the wave's nodes is left, or the deadline passes
  evict    deactivates each such Workload (spec.active=false: evicted whole, kueue v0.19.2
           pkg/controller/core/workload_controller.go lines 672-700), then, once it has no quota reserved, reactivates
           it (requeued whole, lines 640-646)
  reimage  puts the preflight taint on the wave's nodes (they are empty), then asks ARM to bring each scale set's
           instances to its latest model (POST .../manualupgrade: the scale sets' upgrade policy is Manual), once
  upgrading waits for the upgrade as below, then asks for a re-image of every instance (POST .../reimage, the
           api-version the scale-set provider sends), once: a fresh OS disk, so the new boot document runs
  reimaging reads each scale set's instance view until none is updating; a failed one stops the rollout
  health   waits until no node of the wave carries the preflight taint; a node tainted unhealthy by the health agent
           stops the rollout (phase `stopped`) with the wave still fenced
  lift     sets the admission label back to `open`; next wave

What is rolled is tied to the plan it came from: the state records the digest of `plan.json` it rolls. A controller
that finds no state (a new cluster, whose machines were created from this very plan) records the plan as rolled and
rolls nothing; a plan whose digest differs from the recorded one (a `pulumi up` changed the machines' model) starts
again at the first wave, at a wave boundary: a wave already fenced finishes on the scale sets it recorded when it
started. With nothing to roll the controller idles and keeps polling; it never exits (a Deployment's pod that exits
is restarted, and would back off for ever).

Only the holder of the Lease `gpucluster-rollout` steps (prefix_ipam.py's `Leader`, renewed between steps), and it
writes the state only while its lease is valid. Control-plane waves are not the controller's: it passes over them
(docs/operations.md). The annotation
`PAUSE_ANNOTATION: "true"` on the plan ConfigMap pauses it between steps. Every request takes a token from a budget
(kube_client.Budget); ARM 429s are waited out (Retry-After) by kube_client's retries.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

if __package__:
    from . import kube_client as kc
    from .prefix_ipam import Leader
else:  # the agents image: the scripts side by side in /opt/gpucluster
    import kube_client as kc  # type: ignore[no-redef]
    from prefix_ipam import Leader  # type: ignore[no-redef]

DEFAULT_NAMESPACE = "kube-system"
NAMESPACE = os.environ.get("ROLLOUT_NAMESPACE", DEFAULT_NAMESPACE)
LEASE = "gpucluster-rollout"
PLAN_CONFIGMAP = "gpucluster-rollout-plan"
STATE_CONFIGMAP = "gpucluster-rollout-state"
PAUSE_ANNOTATION = "gpucluster.io/rollout-paused"
CHECKPOINT = "gpucluster.io/checkpoint-by"
PREFLIGHT = "gpucluster.io/preflight"
UNHEALTHY = "gpucluster.io/gpu-unhealthy"
WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2"
DOMAIN_LABEL = "gpucluster.io/infiniband-domain"
RACK_LABEL = "gpucluster.io/rack"
POOL_LABEL = "gpucluster.io/pool"
ARM = os.environ.get("ARM_ENDPOINT", "https://management.azure.com").rstrip("/")
ARM_RESOURCE = "https://management.azure.com/"
IMDS_TOKEN = os.environ.get("IMDS_TOKEN_ENDPOINT", "http://169.254.169.254/metadata/identity/oauth2/token")
COMPUTE_API_VERSION = "2026-07-02"
"""What the scale-set provider sends (components/catalog/arm_routes.py SCALE_SET_API_VERSION; a test keeps them equal)."""


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def scale_set_of(node: dict[str, Any]) -> str | None:
    """The scale set in a node's providerID (`azure:///subscriptions/.../virtualMachineScaleSets/<set>/virtualMachines/
    <id>`), lower-cased as Azure compares names."""
    provider = str(_dict(node.get("spec")).get("providerID") or "")
    parts = provider.split("/")
    if "virtualMachineScaleSets" not in parts:
        return None
    index = parts.index("virtualMachineScaleSets") + 1
    return parts[index].lower() if index < len(parts) else None


def has_taint(node: dict[str, Any], key: str) -> bool:
    return any(_dict(t).get("key") == key for t in _list(_dict(node.get("spec")).get("taints")))


def assigned_values(workload: dict[str, Any]) -> set[str]:
    """Every topology value (node name, domain) of a Workload's admission (kueue v0.19.2 apis/kueue/v1beta2/
    workload_types.go TopologyAssignment: slices of universal or prefix+root+suffix values per level)."""
    found: set[str] = set()
    admission = _dict(_dict(workload.get("status")).get("admission"))
    for assignment in _list(admission.get("podSetAssignments")):
        topology = _dict(_dict(assignment).get("topologyAssignment"))
        for piece in _list(topology.get("slices")):
            for level in _list(_dict(piece).get("valuesPerLevel")):
                level = _dict(level)
                if isinstance(level.get("universal"), str):
                    found.add(level["universal"])
                individual = _dict(level.get("individual"))
                prefix, suffix = str(individual.get("prefix") or ""), str(individual.get("suffix") or "")
                found.update(f"{prefix}{root}{suffix}" for root in _list(individual.get("roots")) if isinstance(root, str))
    return found


def finished(workload: dict[str, Any]) -> bool:
    """A Workload whose job ended: Kueue keeps its admission and QuotaReserved and ignores `spec.active` on it
    (seen with kueue v0.19.2 in make e2e, e2e/tests/test_kueue_dev.py), so nothing of it runs on the wave's nodes."""
    return any(_dict(c).get("type") == "Finished" and _dict(c).get("status") == "True"
               for c in _list(_dict(workload.get("status")).get("conditions")))


def reserved(workload: dict[str, Any]) -> bool:
    return any(_dict(c).get("type") == "QuotaReserved" and _dict(c).get("status") == "True"
               for c in _list(_dict(workload.get("status")).get("conditions")))


class ReimageFailedError(Exception):
    pass


@dataclass
class Arm:
    """ARM with the controller's managed identity: re-image a scale set's instances and wait for it."""

    http: kc.Http
    client_id: str
    subscription: str
    resource_group: str
    token: str = ""
    token_until: float = 0.0

    def _token(self) -> str:
        if self.token and time.time() < self.token_until:
            return self.token
        token, expires_in = kc.managed_identity_token(self.http, IMDS_TOKEN, ARM_RESOURCE, self.client_id)
        self.token, self.token_until = token, kc.token_reused_until(expires_in, time.time())
        return token

    def _send(self, method: str, url: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body or {}).encode() if method == "POST" else None
        request = urllib.request.Request(url, data=data, method=method,
                                         headers={"Authorization": f"Bearer {self._token()}",
                                                  "Content-Type": "application/json"})
        return self.http.retrying(lambda: self.http.send(request), tries=6)

    def _names(self, scale_set: str) -> tuple[str, str, str]:
        return kc.segment(self.subscription), kc.segment(self.resource_group), kc.segment(scale_set)

    def upgrade(self, scale_set: str) -> None:
        """POST manualupgrade of every instance: under the Manual upgrade policy the node scale sets carry, a model
        change (a new image version, boot document or size) reaches an instance only this way (MicrosoftDocs
        virtual-machine-scale-sets-perform-manual-upgrades.md); `*` is every instance, as `az vmss update-instances`
        sends it (azure-cli 2.91.0 vm/custom.py `update_vmss_instances(..., ['*'])`)."""
        sub, rg, name = self._names(scale_set)
        self._send("POST", f"{ARM}/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/"
                           f"virtualMachineScaleSets/{name}/manualupgrade?api-version={COMPUTE_API_VERSION}",
                   {"instanceIds": ["*"]})

    def reimage(self, scale_set: str) -> None:
        """POST reimage of every instance of the scale set (ApiError when ARM refuses it): a fresh OS disk from the
        instance's (now latest) model, so the boot document runs again; without `exactVersion` a reimage alone keeps
        the instance's image version (VirtualMachineScaleSetReimageParameters), hence the upgrade first."""
        sub, rg, name = self._names(scale_set)
        self._send("POST", f"{ARM}/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/"
                           f"virtualMachineScaleSets/{name}/reimage?api-version={COMPUTE_API_VERSION}")

    def settled(self, scale_set: str) -> bool:
        """Whether the scale set's instance view shows no instance updating any more; ReimageFailedError when one
        failed (an ApiError is a failed read, asked again next round)."""
        sub, rg, name = self._names(scale_set)
        view = self._send("GET", f"{ARM}/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/"
                                 f"virtualMachineScaleSets/{name}/instanceView?api-version={COMPUTE_API_VERSION}")
        codes = [str(_dict(s).get("code") or "") for s in _list(_dict(view).get("statuses"))]
        if any(c.startswith("ProvisioningState/failed") for c in codes):
            raise ReimageFailedError(f"{scale_set}: an instance ended {', '.join(codes)}")
        return bool(codes) and not any(c.startswith("ProvisioningState/updating") for c in codes)


class StopError(Exception):
    """The rollout stops: the wave stays fenced until an operator acts (docs/operations.md)."""


class Controller:
    def __init__(self, kube: kc.Kube, arm: Arm, now: Callable[[], float] = time.time,
                 leader: Leader | None = None) -> None:
        self.kube, self.arm, self.now, self.leader = kube, arm, now, leader

    # --- state
    def _configmap(self, name: str) -> dict[str, Any] | None:
        try:
            return _dict(self.kube.get(f"/api/v1/namespaces/{kc.segment(NAMESPACE)}/configmaps/{kc.segment(name)}"))
        except kc.ApiError as error:
            if error.status == 404:
                return None
            raise

    def read(self) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None]:
        plan_map = self._configmap(PLAN_CONFIGMAP)
        if plan_map is None:
            raise StopError(f"no ConfigMap {NAMESPACE}/{PLAN_CONFIGMAP}")
        text = str(_dict(plan_map.get("data")).get("plan.json") or "{}")
        plan = _dict(json.loads(text))
        plan["digest"] = hashlib.sha256(text.encode()).hexdigest()
        state_map = self._configmap(STATE_CONFIGMAP)
        state = _dict(json.loads(str(_dict(state_map.get("data")).get("state.json") or "{}"))) if state_map else {}
        state.setdefault("wave", 0)
        state.setdefault("phase", "fence")
        paused = _dict(_dict(plan_map.get("metadata")).get("annotations")).get(PAUSE_ANNOTATION) == "true"
        plan["paused"] = paused
        return plan, state, state_map

    def write(self, state: dict[str, Any], state_map: dict[str, Any] | None) -> None:
        path = f"/api/v1/namespaces/{kc.segment(NAMESPACE)}/configmaps"
        data = {"state.json": json.dumps(state, sort_keys=True)}
        if state_map is None:
            self.kube.write("POST", path, {"apiVersion": "v1", "kind": "ConfigMap",
                                           "metadata": {"name": STATE_CONFIGMAP, "namespace": NAMESPACE}, "data": data})
        else:
            self.kube.write("PUT", f"{path}/{kc.segment(STATE_CONFIGMAP)}", {**state_map, "data": data})

    # --- the wave's world
    def nodes(self, wave: dict[str, Any]) -> list[dict[str, Any]]:
        """The wave's nodes by label, never a list of every node: an InfiniBand domain's or a rack's by its own label
        (its value is the scale set's name), a CPU or system scale set's by its pool; then by the scale set in the
        providerID."""
        found: dict[str, dict[str, Any]] = {}
        for scale_set in (str(s) for s in _list(wave.get("scaleSets"))):
            for selector in (f"{DOMAIN_LABEL}={scale_set}", f"{RACK_LABEL}={scale_set}",
                             f"{POOL_LABEL}={wave.get('pool')}"):
                nodes = [_dict(n) for n in self.kube.list_items("/api/v1/nodes", {"labelSelector": selector})
                         if scale_set_of(_dict(n)) == scale_set.lower()]
                if nodes:
                    found.update((str(_dict(n.get("metadata")).get("name")), n) for n in nodes)
                    break
        return [found[name] for name in sorted(found)]

    def workloads(self, names: set[str]) -> list[dict[str, Any]]:
        return [w for w in self.kube.list_items(f"{WORKLOADS}/workloads")
                if assigned_values(_dict(w)) & names and not finished(_dict(w))]

    def _node_patch(self, node: dict[str, Any], patch: dict[str, Any], guarded: bool = False) -> None:
        """A merge patch; `guarded` carries the resourceVersion read (a taint list is replaced whole, so a change since
        the read must fail with 409, not be overwritten). A label merges by key and needs no guard: the kubelet's
        status updates would make it conflict for nothing."""
        name = str(_dict(node.get("metadata")).get("name"))
        if guarded:
            version = _dict(node.get("metadata")).get("resourceVersion")
            patch = {**patch, "metadata": {**_dict(patch.get("metadata")), "resourceVersion": version}}
        self.kube.write("PATCH", f"/api/v1/nodes/{kc.segment(name)}", patch, "application/merge-patch+json")

    def _workload_patch(self, workload: dict[str, Any], patch: dict[str, Any]) -> None:
        meta = _dict(workload.get("metadata"))
        self.kube.write("PATCH", f"{WORKLOADS}/namespaces/{kc.segment(str(meta.get('namespace')))}/workloads/"
                        f"{kc.segment(str(meta.get('name')))}", patch, "application/merge-patch+json")

    # --- one step
    def step(self) -> str:
        """One step of the current wave; returns what it did (for the log). Only the Lease's holder steps."""
        if self.leader is not None and not self.leader.ensure():
            return "not the leader"
        plan, state, state_map = self.read()
        waves = [_dict(w) for w in _list(plan.get("waves"))]
        if state.get("phase") == "stopped":
            return f"stopped at wave {state['wave']}: {state.get('reason')}"
        if plan["paused"]:
            return "paused"
        if state_map is None:  # a new cluster: its machines run this plan's model already
            state.update(wave=len(waves), phase="fence", plan=plan["digest"])
            return self._written(state, state_map, "idle: the machines were created from this plan")
        if state.get("plan") != plan["digest"] and state["phase"] == "fence":  # a new plan, at a wave boundary
            state.clear()
            state.update(wave=0, phase="fence", plan=plan["digest"])
        index = int(state["wave"])
        while state["phase"] == "fence" and index < len(waves) and waves[index].get("kind") != "pool":
            index += 1  # control-plane waves are the runbook's
        if state["phase"] == "fence" and index >= len(waves):
            return "idle: every wave of this plan is rolled"
        if index != state["wave"]:
            state.update(wave=index, phase="fence")
        if state["phase"] == "fence":
            state["current"] = waves[index]  # the wave keeps its scale sets if the plan changes under it
        wave, fence = _dict(state.get("current")) or waves[index], _dict(plan.get("fence"))
        try:
            did = self._advance(wave, fence, state, float(plan.get("drainDeadlineMinutes") or 0) * 60)
        except StopError as stop:
            state.update(phase="stopped", reason=str(stop))
            did = f"stopped: {stop}"
        return self._written(state, state_map, did)

    def _written(self, state: dict[str, Any], state_map: dict[str, Any] | None, did: str) -> str:
        if self.leader is not None and not self.leader.may_write():
            return "lost the lease: state not written"
        self.write(state, state_map)
        return did

    def _advance(self, wave: dict[str, Any], fence: dict[str, Any], state: dict[str, Any], drain: float) -> str:
        label, phase = str(fence.get("label")), state["phase"]
        nodes = self.nodes(wave)
        names = {str(_dict(n.get("metadata")).get("name")) for n in nodes}
        if phase == "fence":
            deadline = self.now() + drain
            for node in nodes:
                self._node_patch(node, {"metadata": {"labels": {label: fence.get("fenced")}}})
            stamp = datetime.fromtimestamp(deadline, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            for name in sorted(names):
                for pod in self.kube.list_items("/api/v1/pods", {"fieldSelector": f"spec.nodeName={name}"}):
                    meta = _dict(_dict(pod).get("metadata"))
                    if any(_dict(o).get("kind") == "DaemonSet" for o in _list(meta.get("ownerReferences"))):
                        continue
                    self.kube.write("PATCH", f"/api/v1/namespaces/{kc.segment(str(meta.get('namespace')))}/pods/"
                                    f"{kc.segment(str(meta.get('name')))}",
                                    {"metadata": {"annotations": {CHECKPOINT: stamp}}}, "application/merge-patch+json")
            state.update(phase="drain", deadline=deadline)
            return f"wave {state['wave']}: fenced {len(nodes)} nodes until {stamp}"
        if phase == "drain":
            placed = self.workloads(names)
            if not placed:
                state["phase"] = "reimage"
                return f"wave {state['wave']}: drained"
            if self.now() < float(state["deadline"]):
                return f"wave {state['wave']}: waiting for {len(placed)} workloads"
            state["phase"] = "evict"
            return f"wave {state['wave']}: deadline passed with {len(placed)} workloads"
        if phase == "evict":
            placed = self.workloads(names)
            deactivated = [str(k) for k in _list(state.get("deactivated"))]
            for workload in placed:
                meta = _dict(workload.get("metadata"))
                key = f"{meta.get('namespace')}/{meta.get('name')}"
                if _dict(workload.get("spec")).get("active") is not False:
                    self._workload_patch(workload, {"spec": {"active": False}})
                    deactivated.append(key)
            for key in sorted(set(deactivated)):
                namespace, _, name = key.partition("/")
                try:
                    workload = _dict(self.kube.get(f"{WORKLOADS}/namespaces/{kc.segment(namespace)}/workloads/"
                                                   f"{kc.segment(name)}"))
                except kc.ApiError as error:
                    if error.status != 404:
                        raise
                    deactivated.remove(key)  # finished or deleted meanwhile
                    continue
                if not reserved(workload) and not assigned_values(workload) & names:
                    self._workload_patch(workload, {"spec": {"active": True}})  # requeued whole
                    deactivated.remove(key)
            state["deactivated"] = sorted(set(deactivated))
            if not deactivated and not self.workloads(names):
                state["phase"] = "reimage"
            return f"wave {state['wave']}: evicting {len(placed)} workloads, {len(deactivated)} to reactivate"
        if phase == "reimage":
            for node in nodes:
                if not has_taint(node, PREFLIGHT):
                    taints = [*_list(_dict(node.get("spec")).get("taints")),
                              {"key": PREFLIGHT, "value": "rollout", "effect": "NoSchedule"}]
                    self._node_patch(node, {"spec": {"taints": taints}}, guarded=True)
            for scale_set in _list(wave.get("scaleSets")):
                try:
                    self.arm.upgrade(str(scale_set))
                except kc.ApiError as error:
                    raise StopError(f"upgrade of {scale_set} to its latest model: {error}") from None
            state["phase"] = "upgrading"  # a restart from here polls; it never asks for a second upgrade
            return f"wave {state['wave']}: upgrade asked for {', '.join(map(str, _list(wave.get('scaleSets'))))}"
        if phase == "upgrading":
            try:
                waiting = [str(s) for s in _list(wave.get("scaleSets")) if not self.arm.settled(str(s))]
            except ReimageFailedError as error:
                raise StopError(str(error)) from None
            if waiting:
                return f"wave {state['wave']}: upgrading {', '.join(waiting)}"
            for scale_set in _list(wave.get("scaleSets")):
                try:
                    self.arm.reimage(str(scale_set))
                except kc.ApiError as error:
                    raise StopError(f"reimage of {scale_set}: {error}") from None
            state["phase"] = "reimaging"  # a restart from here polls; it never asks for a second reimage
            return f"wave {state['wave']}: reimage asked for {', '.join(map(str, _list(wave.get('scaleSets'))))}"
        if phase == "reimaging":
            try:
                waiting = [str(s) for s in _list(wave.get("scaleSets")) if not self.arm.settled(str(s))]
            except ReimageFailedError as error:
                raise StopError(str(error)) from None
            if waiting:
                return f"wave {state['wave']}: re-imaging {', '.join(waiting)}"
            state["phase"] = "health"
            return f"wave {state['wave']}: re-imaged"
        if phase == "health":
            sick = sorted(str(_dict(n.get("metadata")).get("name")) for n in nodes if has_taint(n, UNHEALTHY))
            if sick:
                raise StopError(f"health check failed on {', '.join(sick)}; the wave stays fenced")
            waiting = [n for n in nodes if has_taint(n, PREFLIGHT)]
            if waiting or not nodes:
                return f"wave {state['wave']}: {len(waiting)} nodes in preflight"
            state["phase"] = "lift"
            return f"wave {state['wave']}: healthy"
        if phase == "lift":
            for node in nodes:
                self._node_patch(node, {"metadata": {"labels": {label: fence.get("open")}}})
            state.update(wave=int(state["wave"]) + 1, phase="fence", deadline=None, current=None)
            return f"wave {int(state['wave']) - 1}: fence lifted"
        raise StopError(f"unknown phase {phase!r}")


def run(controller: Controller, rounds: Iterator[int] | None = None, interval: float = 30.0,
        sleep: Callable[[float], None] = time.sleep) -> str:
    """Steps for ever (or for `rounds`): idle or stopped, it keeps reading, so a new plan or a resumed rollout is
    seen; an API error is logged and the round repeated (after a fresh read)."""
    did = ""
    for _ in rounds if rounds is not None else iter(int, 1):
        try:
            did = controller.step()
        except kc.ApiError as error:
            did = f"error: {error}"
        kc.log(f"rollout: {did}")
        waited = 0.0
        while waited < interval:  # renew the lease while waiting: a holder that stops renewing stops writing
            step = min(interval - waited, controller.leader.retry if controller.leader else interval)
            sleep(step)
            waited += step
            if controller.leader is not None:
                controller.leader.ensure()
    return did


def controller_from_env() -> Controller:
    lease = float(os.environ.get("ROLLOUT_LEASE_SECONDS", 30))
    kube = kc.Kube(timeout=lease / 3, budget=kc.Budget(float(os.environ.get("ROLLOUT_KUBE_PER_MINUTE", 120))))
    arm_http = kc.Http(timeout=lease / 3, budget=kc.Budget(float(os.environ.get("ROLLOUT_ARM_PER_MINUTE", 30))))
    arm = Arm(arm_http, os.environ["AZURE_CLIENT_ID"], os.environ["AZURE_SUBSCRIPTION_ID"],
              os.environ["AZURE_RESOURCE_GROUP"])
    me = os.environ.get("POD_NAME") or os.uname().nodename
    leader = Leader(kube, NAMESPACE, LEASE, me, lease, lease * 2 / 3, lease / 6)
    return Controller(kube, arm, leader=leader)


if __name__ == "__main__":
    print(run(controller_from_env(), interval=float(os.environ.get("ROLLOUT_INTERVAL_SECONDS", 30))))
    sys.exit(0)
