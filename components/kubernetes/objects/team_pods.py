"""Team pods stay off the host: no host network, host PID namespace or privileged container in a team namespace.

The IMDS guard (objects/imds_guard.py) is a Cilium policy and covers pod-network endpoints only. A host-network pod
shares its node's network stack, and a privileged or host-PID one can enter it; on a system node (untainted, carrying
the add-on identities) any of them reaches IMDS and takes the autoscaler's or node-lifecycle's token. This
ValidatingAdmissionPolicy refuses them in every namespace labelled `gpucluster.io/team` (the team namespaces,
objects/kueue.py `team_namespace`). Pod Security admission's `baseline` level would also forbid these, but it
forbids adding capabilities outside its default list too (kubernetes/website content/en/docs/concepts/security/
pod-security-standards.md, Baseline "Host Namespaces", "Privileged Containers", "Capabilities"), and a training pod
adds IPC_LOCK to register memory with its HCAs (docs/scheduling.md): the policy takes only the three fields.
"""

from __future__ import annotations

from components.kubernetes.objects.common import Object, obj
from components.vocabulary import LABEL_TEAM

POLICY = "gpucluster-team-pods-off-host"


def _unset(path: str) -> str:
    parent, _, field = path.rpartition(".")
    return f"(!has({parent}.{field}) || !{path})"


def _not_privileged(containers: str) -> str:
    return (f"(!has(object.spec.{containers}) || object.spec.{containers}.all(c, !has(c.securityContext) || "
            f"{_unset('c.securityContext.privileged')}))")


def team_pod_policy() -> list[Object]:
    why = ("on a system node it reaches IMDS (169.254.169.254) and the add-on identities' tokens; the IMDS guard "
           "covers pod-network pods only (docs/capacity.md)")
    policy = obj("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", POLICY, spec={
        "failurePolicy": "Fail",
        "matchConstraints": {
            "namespaceSelector": {"matchExpressions": [{"key": LABEL_TEAM, "operator": "Exists"}]},
            "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                               "resources": ["pods"]}]},
        "validations": [
            {"expression": _unset("object.spec.hostNetwork"),
             "message": f"a pod in a team namespace may not use the host network (spec.hostNetwork): {why}"},
            {"expression": _unset("object.spec.hostPID"),
             "message": f"a pod in a team namespace may not share the host PID namespace (spec.hostPID): {why}"},
            {"expression": f"{_not_privileged('containers')} && {_not_privileged('initContainers')}",
             "message": "a pod in a team namespace may not run a privileged container (securityContext.privileged): "
                        f"{why}"},
        ]})
    binding = obj("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", POLICY, spec={
        "policyName": POLICY, "validationActions": ["Deny"]})
    return [policy, binding]
