"""A stack's Kubernetes minor against the version table: what runs, whether it is supported, how long for.

Pure. A minor the table has no coupled versions for, a component whose project does not list the minor, or
a patch newer than the table's latest that the stack does not confirm (cluster.kubernetesPatchVerified), is a
plan error (exit 2). End of life is judged against a date given by the caller: past it the
policy pack's version rule fails (policies/rules/versions.py); within WARN_DAYS the summary warns.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from gpucluster.catalog.versions import (
    ADDONS,
    KUBERNETES_RELEASES,
    MINOR_COUPLED,
    NODE_APIS,
    RACK_ADDONS,
    Component,
    KubernetesRelease,
    minor_of,
)
from gpucluster.errors import Problem, SpecError
from gpucluster.spec import ClusterSpec

WARN_DAYS = 60
PATH = "cluster.kubernetesVersion"


@dataclass(frozen=True)
class VersionPlan:
    kubernetes_version: str
    release: KubernetesRelease
    components: tuple[Component, ...]
    """Every pinned component of the stack, the minor-coupled ones resolved for its minor."""
    patch_verified: str | None = None
    """Where the stack confirmed a patch newer than the table's (cluster.kubernetesPatchVerified.source)."""

    @property
    def minor(self) -> str:
        return self.release.minor

    def days_to_end_of_life(self, today: date) -> int:
        return (self.release.end_of_life - today).days

    def status(self, today: date, warn_days: int = WARN_DAYS) -> str:
        left = self.days_to_end_of_life(today)
        return "end-of-life" if left < 0 else "ending" if left <= warn_days else "supported"

    def warnings(self, today: date, warn_days: int = WARN_DAYS) -> list[str]:
        left, eol = self.days_to_end_of_life(today), self.release.end_of_life.isoformat()
        if left < 0:
            return [f"Kubernetes {self.minor} reached end of life on {eol}: no security fixes; upgrade "
                    "(docs/operations.md, minor upgrade)"]
        if left <= warn_days:
            return [f"Kubernetes {self.minor} reaches end of life on {eol}, in {left} days; plan the minor upgrade "
                    "(docs/operations.md)"]
        return []


def check_components(minor: str, components: tuple[Component, ...], in_cluster: bool) -> list[Problem]:
    return [Problem(PATH, f"{c.name} {c.version} does not support Kubernetes {minor} (it lists "
                    f"{', '.join(c.minors)}); pick a minor it supports or move it in components/catalog/versions.py")
            for c in components if (in_cluster or not c.in_cluster) and minor not in c.minors]


def _patch_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def plan_versions(spec: ClusterSpec, addons: tuple[Component, ...] = ADDONS) -> VersionPlan:
    minor = minor_of(spec.kubernetes_version)
    release = KUBERNETES_RELEASES.get(minor)
    coupled = MINOR_COUPLED.get(minor)
    if release is None or coupled is None:
        known = ", ".join(m for m in MINOR_COUPLED if m in KUBERNETES_RELEASES)
        raise SpecError([Problem(PATH, f"Kubernetes {minor} has no coupled versions in the catalogue "
                                 f"(cluster-autoscaler, CoreDNS, etcd of that minor); use one of {known}")])
    newer = _patch_tuple(spec.kubernetes_version) > _patch_tuple(release.latest_patch)
    if newer and spec.kubernetes_patch_verified is None:
        raise SpecError([Problem(PATH, f"{spec.kubernetes_version} is newer than {release.latest_patch}, the latest "
                                 f"{minor} patch in the version table: its kubelet and kubeadm packages may not exist, "
                                 "and then every machine fails at boot; use a patch up to "
                                 f"{release.latest_patch}, or confirm this one and say where under "
                                 f"cluster.kubernetesPatchVerified {{version: {spec.kubernetes_version}, source: ...}} "
                                 "(docs/versions.md)")])
    # The DRA driver and DRANET run only on clusters with rack pools (components/kubernetes/rack_devices.py).
    racks = RACK_ADDONS if any(p.racks is not None for p in spec.pools) else ()
    components = (*coupled.components, *NODE_APIS, *addons, *racks)
    problems = check_components(minor, components, spec.in_cluster.enabled)
    if problems:
        raise SpecError(problems)
    verified = spec.kubernetes_patch_verified.source if newer and spec.kubernetes_patch_verified else None
    return VersionPlan(spec.kubernetes_version, release, components, verified)
