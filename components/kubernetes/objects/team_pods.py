"""Team pods stay off the host: Pod Security's baseline checks that keep a pod out of its node, plus IPC_LOCK.

The IMDS guard (objects/imds_guard.py) is a Cilium policy and covers pod-network endpoints only. A pod that shares
its node's network, PID or IPC namespace, runs privileged, mounts a host path (`/run/containerd`, `/proc`), adds a
capability such as SYS_ADMIN, or binds a host port can reach the node itself; on a system node (untainted, carrying
the add-on identities) that means IMDS and the autoscaler's or node-lifecycle's token. This
ValidatingAdmissionPolicy refuses those in every namespace labelled `gpucluster.io/team` (the team namespaces,
objects/kueue.py `team_namespace`), for containers, init containers and ephemeral containers, and on the
`pods/ephemeralcontainers` subresource `kubectl debug` writes.

Why not Pod Security admission itself: its `baseline` level refuses every capability outside its list
(k8s.io/pod-security-admission `policy/check_capabilities_baseline.go`, extracted into
components/catalog/pod_security_baseline.json by tools/pod_security_baseline.py), and a training pod adds IPC_LOCK to
register memory with its HCAs (docs/scheduling.md); a level cannot be widened by one capability. So the policy
takes baseline's checks that concern the host (`check_hostNamespaces.go`, `check_privileged.go`,
`check_hostPathVolumes.go`, `check_hostPorts.go`, `check_capabilities_baseline.go`) with IPC_LOCK added; baseline's
AppArmor, SELinux, /proc mount, seccomp and sysctl checks are not taken (docs/capacity.md says so).
"""

from __future__ import annotations

import json
from pathlib import Path

from components.kubernetes.objects.common import Object, obj
from components.vocabulary import LABEL_TEAM

POLICY = "gpucluster-team-pods-off-host"
BASELINE = json.loads((Path(__file__).resolve().parents[2] / "catalog" / "pod_security_baseline.json").read_text())
ALLOWED_CAPABILITIES = (*BASELINE["capabilities"], "IPC_LOCK")
"""Pod Security baseline's list, and IPC_LOCK for RDMA memory registration."""
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


def _unset(path: str) -> str:
    parent, _, field = path.rpartition(".")
    return f"(!has({parent}.{field}) || !{path})"


def _every_container(condition: str) -> str:
    """`condition` (over `c`) holds for every container of every kind the pod has."""
    return " && ".join(f"(!has(object.spec.{kind}) || object.spec.{kind}.all(c, {condition}))"
                       for kind in CONTAINER_LISTS)


NOT_PRIVILEGED = _every_container(f"!has(c.securityContext) || {_unset('c.securityContext.privileged')}")
ALLOWED_ADDS = _every_container(
    "!has(c.securityContext) || !has(c.securityContext.capabilities) || !has(c.securityContext.capabilities.add) || "
    f"c.securityContext.capabilities.add.all(a, a in {json.dumps(list(ALLOWED_CAPABILITIES))})")
NO_HOST_PORTS = _every_container("!has(c.ports) || c.ports.all(p, !has(p.hostPort) || p.hostPort == 0)")
NO_HOST_PATHS = "!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.hostPath))"


def team_pod_policy() -> list[Object]:
    why = ("on a system node it reaches IMDS (169.254.169.254) and the add-on identities' tokens; the IMDS guard "
           "covers pod-network pods only (docs/capacity.md)")
    rule = "a pod in a team namespace may not"
    policy = obj("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", POLICY, spec={
        "failurePolicy": "Fail",
        "matchConstraints": {
            "namespaceSelector": {"matchExpressions": [{"key": LABEL_TEAM, "operator": "Exists"}]},
            "resourceRules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]},
                # `kubectl debug` adds an ephemeral container through this subresource (an UPDATE of the Pod).
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"],
                 "resources": ["pods/ephemeralcontainers"]}]},
        "validations": [
            {"expression": _unset("object.spec.hostNetwork"),
             "message": f"{rule} use the host network (spec.hostNetwork): {why}"},
            {"expression": _unset("object.spec.hostPID"),
             "message": f"{rule} share the host PID namespace (spec.hostPID): {why}"},
            {"expression": _unset("object.spec.hostIPC"),
             "message": f"{rule} share the host IPC namespace (spec.hostIPC): {why}"},
            {"expression": NOT_PRIVILEGED,
             "message": f"{rule} run a privileged container, init or ephemeral container "
                        f"(securityContext.privileged): {why}"},
            {"expression": NO_HOST_PATHS,
             "message": f"{rule} mount a host path (volumes[].hostPath): {why}"},
            {"expression": ALLOWED_ADDS,
             "message": f"{rule} add a capability beyond Pod Security baseline's and IPC_LOCK "
                        f"(securityContext.capabilities.add; allowed: {', '.join(ALLOWED_CAPABILITIES)}): {why}"},
            {"expression": NO_HOST_PORTS,
             "message": f"{rule} bind a host port (ports[].hostPort): {why}"},
        ]})
    binding = obj("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", POLICY, spec={
        "policyName": POLICY, "validationActions": ["Deny"]})
    return [policy, binding]
