"""The order `pulumi up` applies the in-cluster layer in, read from the recorded registrations, and the admission
prerequisites each object needs before it.

Pure. What comes before a resource: its dependencies (explicit `depends_on`, with a component expanded to its
children, and the resources its inputs come from), each with what comes before it, and its parent with what comes
before the parent: the Python SDK registers a child only once its parent's URN has resolved (pulumi 3.272
`runtime/resource.py` `prepare_resource`: "Wait for our parent to resolve"), and a parent registers only after its
own `depends_on` (same function: "all our dependencies must be finished"). So a child waits for its parent's
dependsOn.

Gates are the local commands that wait for the cluster (components/kubernetes/readiness_gate.py): each names the
DaemonSet it watches and the share in its environment. An object behind a gate is applied only once the gate has
passed; the bring-up simulation places the gate where its DaemonSet runs on the share (components/simulation/
bring_up_layer.py).

Admission prerequisites (kube-apiserver refuses the object, or the pods its controller creates, until they exist):
the object's namespace (the NamespaceLifecycle plugin: "namespace not found"), its pods' priority class (the
Priority plugin, kubernetes `plugin/pkg/admission/priority/admission.go`: "no PriorityClass with name ... was
found") and service account (the ServiceAccount plugin, `plugin/pkg/admission/serviceaccount/admission.go`:
"error looking up service account"), and the CRD of a custom resource (no REST mapping: the API answers 404).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gpucluster.errors import Problem
from gpucluster.kubernetes.readiness_gate import READINESS_SCRIPT

BUILT_IN_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
"""Created by kube-apiserver itself (kubernetes `pkg/controlplane/controller/systemnamespaces`)."""
BUILT_IN_PRIORITY_CLASSES = frozenset({"system-node-critical", "system-cluster-critical"})
"""kube-apiserver's own (kubernetes `pkg/apis/scheduling` SystemPriorityClasses)."""
DEFAULT_ACCOUNT = "default"
"""Created in every namespace by kube-controller-manager's service-account controller."""
BUILT_IN_GROUPS = frozenset({"", "apps", "batch", "policy", "rbac.authorization.k8s.io", "scheduling.k8s.io",
                             "apiextensions.k8s.io", "flowcontrol.apiserver.k8s.io", "admissionregistration.k8s.io",
                             "resource.k8s.io", "networking.k8s.io", "storage.k8s.io", "coordination.k8s.io",
                             "node.k8s.io", "discovery.k8s.io", "certificates.k8s.io"})
"""API groups kube-apiserver serves itself (no CRD)."""
CRD_BY_RELEASE = {"kueue.x-k8s.io": "kueue"}
"""Custom resource groups whose CRDs a chart installs with its release (kubernetes-sigs/kueue v0.19.2
charts/kueue/templates/crd/), by the release's chart name as recorded."""
CRD_BY_GATE = {"cilium.io": "cilium"}
"""Custom resource groups whose CRDs a running workload registers, by the DaemonSet a gate watches: cilium-operator
registers cilium.io's CRDs and the agents wait for them before they report ready (cilium `pkg/k8s/apis/cilium.io/
client` RegisterCRDs, the operator's), so a gate on the agents passes only once they exist."""
RELEASE_TYPE = "kubernetes:helm.sh/v3:Release"
COMMAND_TYPE = "command:local:Command"


@dataclass(frozen=True)
class Recorded:
    """One registration as the engine records it (or a preview step's newState)."""
    urn: str
    type: str
    parent: str
    dependencies: tuple[str, ...]
    inputs: dict[str, Any]

    @property
    def name(self) -> str:
        return self.urn.rsplit("::", 1)[-1]


def from_states(states: Iterable[dict[str, Any]]) -> list[Recorded]:
    """Preview steps' `newState`s (ours or `pulumi preview --json`'s) as recorded registrations."""
    return [Recorded(s["urn"], s["type"], s.get("parent") or "", tuple(s.get("dependencies") or ()),
                     s.get("inputs") or {}) for s in states]


@dataclass(frozen=True)
class Gate:
    urn: str
    namespace: str
    daemonset: str
    percent: int


@dataclass(frozen=True)
class KubeObject:
    urn: str
    kind: str
    api_version: str
    namespace: str | None
    name: str
    inputs: dict[str, Any]


class ApplyOrder:
    """What `pulumi up` applies before each recorded resource."""

    def __init__(self, recorded: list[Recorded]) -> None:
        self.by_urn = {r.urn: r for r in recorded}
        self._before: dict[str, frozenset[str]] = {}
        self.gates = [g for r in recorded if (g := _gate(r)) is not None]
        self.objects = [o for r in recorded if (o := _object(r)) is not None]
        self.releases = {str(r.inputs.get("name")): r for r in recorded if r.type == RELEASE_TYPE}

    def before(self, urn: str) -> frozenset[str]:
        """Every resource created before `urn` (iterative: prod's chains are long)."""
        if urn in self._before:
            return self._before[urn]
        stack = [urn]
        while stack:
            top = stack[-1]
            record = self.by_urn.get(top)
            direct = [*(record.dependencies if record else ()), *([record.parent] if record and record.parent else [])]
            pending = [d for d in direct if d not in self._before and d != top]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            found: set[str] = set()
            for d in direct:
                found.add(d)
                found |= self._before.get(d, frozenset())
            self._before[top] = frozenset(found)
        return self._before[urn]

    def gates_before(self, urn: str) -> tuple[Gate, ...]:
        earlier = self.before(urn)
        return tuple(g for g in self.gates if g.urn in earlier)

    def find(self, kind: str, name: str, namespace: str | None = None) -> KubeObject | None:
        return next((o for o in self.objects if o.kind == kind and o.name == name and o.namespace == namespace), None)


def _gate(r: Recorded) -> Gate | None:
    if r.type != COMMAND_TYPE or r.inputs.get("create") != READINESS_SCRIPT:
        return None
    env = r.inputs.get("environment") or {}
    return Gate(r.urn, str(env["NAMESPACE"]), str(env["NAME"]), int(env["MIN_PERCENT"]))


def _object(r: Recorded) -> KubeObject | None:
    if not r.type.startswith("kubernetes:") or r.type.startswith(("kubernetes:helm.sh/", "kubernetes:yaml/")) \
            or r.type.endswith("List") or r.type.startswith("pulumi:providers:"):
        return None
    group_version, kind = r.type.split(":")[1], r.type.rsplit(":", 1)[1]
    metadata = r.inputs.get("metadata") or {}
    return KubeObject(r.urn, kind, group_version.removeprefix("core/"), metadata.get("namespace"),
                      str(metadata.get("name", r.name)), r.inputs)


def pod_template(inputs: dict[str, Any], kind: str) -> dict[str, Any] | None:
    spec = inputs.get("spec") or {}
    if kind in ("Deployment", "DaemonSet", "StatefulSet", "Job"):
        return (spec.get("template") or {}).get("spec") or {}
    if kind == "CronJob":
        return ((((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}).get("spec")) or {}
    return None


def prerequisites(o: KubeObject) -> list[tuple[str, str, str | None]]:
    """(kind, name, namespace) of what admission needs before `o`: its namespace, its pods' priority class and
    service account, its CRD (as ("CustomResourceDefinition", group, None))."""
    needs: list[tuple[str, str, str | None]] = []
    if o.namespace and o.namespace not in BUILT_IN_NAMESPACES:
        needs.append(("Namespace", o.namespace, None))
    group = o.api_version.split("/")[0] if "/" in o.api_version else ""
    if group not in BUILT_IN_GROUPS:
        needs.append(("CustomResourceDefinition", group, None))
    pod = pod_template(o.inputs, o.kind)
    if pod is not None:
        priority = pod.get("priorityClassName")
        if priority and priority not in BUILT_IN_PRIORITY_CLASSES:
            needs.append(("PriorityClass", str(priority), None))
        account = pod.get("serviceAccountName") or DEFAULT_ACCOUNT
        if account != DEFAULT_ACCOUNT:
            needs.append(("ServiceAccount", str(account), o.namespace or "default"))
    return needs


def providers_of(order: ApplyOrder, kind: str, name: str, namespace: str | None) -> list[str]:
    """URNs any one of which, created before an object, makes the prerequisite exist."""
    if kind == "CustomResourceDefinition":
        found = [o.urn for o in order.objects if o.kind == kind and (o.inputs.get("spec") or {}).get("group") == name]
        if name in CRD_BY_RELEASE and CRD_BY_RELEASE[name] in order.releases:
            found.append(order.releases[CRD_BY_RELEASE[name]].urn)
        found += [g.urn for g in order.gates if CRD_BY_GATE.get(name) == g.daemonset]
        return found
    found = [o.urn for o in order.objects if o.kind == kind and o.name == name and o.namespace == namespace]
    if kind == "Namespace":
        found += [r.urn for r in order.releases.values()
                  if r.inputs.get("createNamespace") and r.inputs.get("namespace") == name]
    return found


def prerequisite_problems(order: ApplyOrder) -> list[Problem]:
    """Each object whose admission prerequisite `pulumi up` does not apply before it (or nothing applies at all)."""
    problems = []
    for o in order.objects:
        earlier = order.before(o.urn)
        for kind, name, namespace in prerequisites(o):
            providers = providers_of(order, kind, name, namespace)
            if any(p in earlier for p in providers):
                continue
            what = f"{kind} {namespace + '/' if namespace else ''}{name}"
            where = "nothing in the program applies it" if not providers else \
                "nothing orders it before (dependsOn, a parent's dependsOn)"
            problems.append(Problem("cluster.inCluster", f"{o.kind} {o.namespace + '/' if o.namespace else ''}"
                                                         f"{o.name} needs {what} to exist first: {where}"))
    return problems
