"""A change of Kubernetes version between two plans, judged as kubeadm upgrades a cluster.

kubeadm documents one path only (kubernetes.io/docs/tasks/administer-cluster/kubeadm/kubeadm-upgrade/): "from
version 1.35.x to version 1.36.x, and from version 1.36.x to 1.36.y (where y > x). Skipping MINOR versions
when upgrading is unsupported", and `kubeadm upgrade apply` refuses a skipped minor as a mandatory error
(kubernetes/kubernetes cmd/kubeadm/app/phases/upgrade/policy.go EnforceVersionPolicies: "kubeadm can upgrade
only 1 minor version at a time"). A downgrade is no path at all: the API servers' objects in etcd were written
by the newer release, and new machines would boot the older kubelet against running newer ones. The version
is read from the API-server scale set's tag, so a real `pulumi preview --json` is judged the same way.
"""

from __future__ import annotations

from gpucluster.diff.sides import Side
from gpucluster.policies.rules.props import SCALE_SET
from gpucluster.vocabulary import KUBERNETES_VERSION_TAG, ROLE_TAG

VersionError = tuple[str, str, str]
"""(resource, message, fix) of one error (a `Flag` in components/diff/compare.py)."""


def _version(side: Side) -> tuple[str, tuple[int, int, int]] | None:
    for urn, state in sorted(side.resources.items()):
        tags = (state.get("inputs") or {}).get("tags")
        if state.get("type") != SCALE_SET or not isinstance(tags, dict) or tags.get(ROLE_TAG) != "apiserver":
            continue
        text = tags.get(KUBERNETES_VERSION_TAG)
        parts = str(text).split(".")
        if len(parts) == 3 and all(p.isascii() and p.isdigit() for p in parts):
            return urn.rsplit("::", 1)[-1], (int(parts[0]), int(parts[1]), int(parts[2]))
    return None


def version_flags(base: Side, head: Side) -> list[VersionError]:
    old, new = _version(base), _version(head)
    if old is None or new is None or old[1] == new[1]:
        return []
    resource, (before, after) = new[0], (old[1], new[1])
    shown = f"{'.'.join(map(str, before))} -> {'.'.join(map(str, after))}"
    if after < before:
        what = "minor" if after[:2] < before[:2] else "patch"
        return [(resource, f"Kubernetes {shown} is a {what} downgrade, which kubeadm does not support (it upgrades "
                           "to a newer patch or the next minor only)",
                 f"keep cluster.kubernetesVersion at {'.'.join(map(str, before))} or move it forward")]
    if after[0] != before[0] or after[1] > before[1] + 1:
        return [(resource, f"Kubernetes {shown} skips a minor; kubeadm upgrades one minor at a time",
                 f"upgrade to {before[0]}.{before[1] + 1} first (docs/operations.md, \"Minor upgrade of a running "
                 "cluster\")")]
    return []
