"""Whether a gang can still be admitted on a topology-aware pool the autoscaler has shrunk, read from the rendered
objects (ClusterQueues, ResourceFlavors, AdmissionChecks, ProvisioningRequestConfigs, the autoscaler's Deployment
and role).

Pure. The rules, read at their source:
- Kueue's topology-aware scheduling places pods only on existing Ready nodes and integrates with
  cluster-autoscaler only through the Provisioning AdmissionCheck (kueue v0.19.2
  site/content/en/docs/concepts/topology_aware_scheduling.md, "ClusterAutoscaler support"; the check is an
  AdmissionCheck with controllerName `kueue.x-k8s.io/provisioning-request` naming a ProvisioningRequestConfig,
  referenced by the ClusterQueue's `admissionChecksStrategy` for the flavor, concepts/admission_check/
  provisioning_request.md). A gang larger than the nodes left is not admitted, its pods stay suspended, and the
  autoscaler never sees a pending pod.
- cluster-autoscaler acts on ProvisioningRequests only with `--enable-provisioning-requests=true` and the RBAC its
  FAQ lists (provisioningrequests, provisioningrequests/status, podtemplates); of its classes only
  `best-effort-atomic-scale-up.autoscaling.x-k8s.io` scales a node group up (`check-capacity` checks only)
  (kubernetes/autoscaler cluster-autoscaler-1.36.1 cluster-autoscaler/FAQ.md).
"""

from __future__ import annotations

from typing import Any

from gpucluster.vocabulary import LABEL_POOL, PROVISIONING_REQUEST_CONTROLLER

PROVISIONING_CONTROLLER = PROVISIONING_REQUEST_CONTROLLER
SCALING_CLASSES = ("best-effort-atomic-scale-up.autoscaling.x-k8s.io",)
AUTOSCALER_FLAG = "--enable-provisioning-requests=true"


def _by_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def _checks_on(queue: dict[str, Any], flavor: str) -> list[str]:
    """Admission checks a ClusterQueue runs for workloads admitted on `flavor` (spec.admissionChecks applies to
    every flavor; admissionChecksStrategy entries without onFlavors too)."""
    spec = queue.get("spec") or {}
    names = list(spec.get("admissionChecks") or [])
    for rule in (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []:
        if not rule.get("onFlavors") or flavor in rule["onFlavors"]:
            names.append(rule["name"])
    return names


def _scales_up(check: dict[str, Any] | None, configs: dict[str, dict[str, Any]]) -> str | None:
    """None if the AdmissionCheck asks the autoscaler to scale up; else why not."""
    if check is None:
        return "no such AdmissionCheck"
    spec = check.get("spec") or {}
    if spec.get("controllerName") != PROVISIONING_CONTROLLER:
        return f"its controller is {spec.get('controllerName')}, not {PROVISIONING_CONTROLLER}"
    parameters = spec.get("parameters") or {}
    config = configs.get(parameters.get("name", "")) if parameters.get("kind") == "ProvisioningRequestConfig" else None
    if config is None:
        return "it names no ProvisioningRequestConfig"
    klass = (config.get("spec") or {}).get("provisioningClassName")
    if klass not in SCALING_CLASSES:
        return f"its class {klass} does not scale a node group up"
    return None


def _autoscaler_ready(objects: list[dict[str, Any]], autoscaler: str) -> str | None:
    deployment = _by_kind(objects, "Deployment").get(autoscaler)
    if deployment is None:
        return "no cluster-autoscaler Deployment"
    args = [a for c in deployment["spec"]["template"]["spec"]["containers"] for a in c.get("args") or []]
    if AUTOSCALER_FLAG not in args:
        return f"cluster-autoscaler runs without {AUTOSCALER_FLAG}"
    rules = [r for o in objects if o["kind"] == "ClusterRole" and o["metadata"]["name"] == autoscaler
             for r in o.get("rules") or []]
    granted = {(g, res, v) for r in rules for g in r.get("apiGroups") or [] for res in r.get("resources") or []
               for v in r.get("verbs") or []}
    needed = [("autoscaling.x-k8s.io", "provisioningrequests", v) for v in ("list", "watch", "update")] + \
        [("autoscaling.x-k8s.io", "provisioningrequests/status", "update"), ("", "podtemplates", "get")]
    missing = [f"{res} {v}" for g, res, v in needed if (g, res, v) not in granted]
    return f"cluster-autoscaler's role lacks {', '.join(missing)}" if missing else None


def scale_from_zero_problems(objects: list[dict[str, Any]], pool_bounds: dict[str, tuple[int, int]],
                             autoscaler: str = "cluster-autoscaler") -> list[tuple[str, str]]:
    """(flavor, reason) for each topology-aware flavor on a pool the autoscaler may shrink (`pool_bounds`: pool ->
    (autoscaler minimum, size)) that a ClusterQueue places gangs on without a way to scale the pool back up."""
    flavors = _by_kind(objects, "ResourceFlavor")
    checks = _by_kind(objects, "AdmissionCheck")
    configs = _by_kind(objects, "ProvisioningRequestConfig")
    problems: list[tuple[str, str]] = []
    autoscaler_problem = _autoscaler_ready(objects, autoscaler)
    for queue in sorted(_by_kind(objects, "ClusterQueue").values(), key=lambda q: q["metadata"]["name"]):
        for group in (queue.get("spec") or {}).get("resourceGroups") or []:
            for entry in group.get("flavors") or []:
                flavor = flavors.get(entry["name"])
                if flavor is None or not (flavor.get("spec") or {}).get("topologyName"):
                    continue
                pool = ((flavor["spec"].get("nodeLabels") or {}).get(LABEL_POOL)) or ""
                minimum, size = pool_bounds.get(pool, (0, 0))
                if minimum >= size:
                    continue
                why = [_scales_up(checks.get(name), configs) for name in _checks_on(queue, entry["name"])]
                scaling = any(w is None for w in why)
                reason = (None if scaling else "no ProvisioningRequest admission check covers it"
                          + (f" ({'; '.join(w for w in why if w)})" if why else ""))
                if scaling and autoscaler_problem:
                    reason = autoscaler_problem
                if reason:
                    problems.append((entry["name"], (
                        f"ClusterQueue {queue['metadata']['name']} places gangs topology-aware on pool {pool}, which "
                        f"the autoscaler may shrink to {minimum:,} of {size:,} nodes; Kueue's TAS counts only existing "
                        f"Ready nodes and asks the autoscaler for more only through a ProvisioningRequest admission "
                        f"check: {reason}, so once idle nodes are removed a larger gang is never admitted, no pod is "
                        "pending and nothing scales up")))
    return problems
