"""Every Kubernetes object the program declares, as YAML `kubectl apply -f` accepts."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

import yaml

from gpucluster.offline.crds import crds_for
from gpucluster.offline.engine import SECRET_MARK


class Declared(Protocol):
    """A resource as the program declared it: a registration under mocks (components/offline/engine.py) or a
    preview step's new state (components/offline/preview_steps.py `declared`)."""

    @property
    def type(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def custom(self) -> bool: ...
    @property
    def inputs(self) -> dict[str, Any]: ...


_SKIP_SUFFIXES = ("List", "Patch")
"""`kubernetes:core/v1:ConfigMapList` and friends are not objects to apply; a `...Patch` (server-side apply of part of
an object a chart owns, e.g. DRANET's database mount) is recorded in preview.json only."""

# libyaml's emitter when PyYAML was built with it (several times faster on prod's manifests); same output.
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _dump(document: Any) -> str:
    return yaml.dump(document, Dumper=_DUMPER, sort_keys=False)


def api_version(resource_type: str) -> str:
    """`kubernetes:core/v1:Namespace` -> `v1`; `kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue` -> as is."""
    group_version = resource_type.split(":")[1]
    return group_version.removeprefix("core/")


def _sorted(value: Any) -> Any:
    """Recorded inputs come back in no stable key order; sorted keys keep manifests diff-able."""
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def kubernetes_objects(registrations: Iterable[Declared]) -> list[dict[str, Any]]:
    objects = []
    for reg in registrations:
        if not (reg.custom and reg.type.startswith("kubernetes:")) or reg.type.endswith(_SKIP_SUFFIXES):
            continue
        if reg.type.startswith(("kubernetes:helm.sh/", "kubernetes:yaml/", "kubernetes:kustomize/")):
            continue  # rendered by the provider at deploy time; recorded in preview.json
        kind = reg.type.rsplit(":", 1)[1]
        if kind == "Secret" and SECRET_MARK in (reg.inputs.get("data"), reg.inputs.get("stringData")):
            continue  # pulumi-kubernetes keeps a Secret's data secret: it exists only in state (bootstrap tokens)
        body = {k: v for k, v in reg.inputs.items() if k not in ("apiVersion", "kind")}
        metadata = dict(body.pop("metadata", {}) or {})
        metadata.setdefault("name", reg.name)
        objects.append({"apiVersion": api_version(reg.type), "kind": kind, "metadata": _sorted(metadata),
                        **_sorted(body)})
    return objects


INSTALL_ORDER = (
    "PriorityClass", "Namespace", "CustomResourceDefinition",
    "NetworkPolicy", "ResourceQuota", "LimitRange", "PodSecurityPolicy", "PodDisruptionBudget", "ServiceAccount",
    "Secret", "ConfigMap", "StorageClass", "PersistentVolume", "PersistentVolumeClaim",
    "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service", "DaemonSet", "Pod", "ReplicationController",
    "ReplicaSet", "Deployment", "HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress",
    "APIService",
)
"""The order manifests/ applies in: Helm's install order (helm/helm `pkg/releaseutil/kind_sorter.go`, InstallOrder)
with three kinds moved to the front, because what comes after cannot be admitted without them:
PriorityClasses (kube-apiserver's Priority admission plugin refuses a pod whose priorityClassName does not
exist, kubernetes/kubernetes plugin/pkg/admission/priority/admission.go), Namespaces (a namespaced object in a
missing namespace is refused) and CustomResourceDefinitions (a custom object of an undefined kind is refused).
Kinds it does not list (custom resources) come last, by kind, as Helm puts them."""


def _slug(*parts: str) -> str:
    return re.sub(r"[^a-z0-9.-]+", "-", "-".join(p for p in parts if p).lower()).strip("-")


def _file_name(obj: dict[str, Any]) -> str:
    """`<install rank>-<kind>-<namespace>-<name>.yaml`: from the object's identity only, so a name never
    depends on what else the program declares. `kubectl apply -f <dir>` reads files in name order, so the
    rank (a function of the kind) puts priority classes, namespaces and CRDs first."""
    meta = obj["metadata"]
    kind = obj["kind"]
    rank = INSTALL_ORDER.index(kind) if kind in INSTALL_ORDER else len(INSTALL_ORDER)
    return f"{rank:02d}-{_slug(kind, meta.get('namespace', ''), meta['name'])}.yaml"


def write_manifests(objects: list[dict[str, Any]], directory: Path) -> list[Path]:
    """Every object, and the vendored definition of each custom kind among them (components/offline/crds.py),
    one file each, named so that `kubectl apply -f <dir>` applies them in a working order."""
    directory.mkdir(parents=True, exist_ok=True)
    objects = [*crds_for(objects), *objects]
    names = [_file_name(obj) for obj in objects]
    paths = []
    for obj, name in sorted(zip(objects, names, strict=True), key=lambda pair: pair[1]):
        if names.count(name) > 1:  # same kind and name in two API groups: the group tells them apart
            name = name.removesuffix(".yaml") + "-" + _slug(obj["apiVersion"].split("/")[0]) + ".yaml"
        path = directory / name
        path.write_text(_dump(obj), encoding="utf-8")
        paths.append(path)
    return paths


HELM_RELEASE = "kubernetes:helm.sh/v3:Release"


def helm_releases(registrations: Iterable[Declared]) -> list[dict[str, Any]]:
    """Helm releases the program declares, with chart, version, how they install (atomic, skipAwait, timeout)
    and values: the provider renders them at deploy time, so they are listed beside the manifests rather than
    as objects."""
    keys = ("name", "chart", "version", "namespace", "repositoryOpts", "atomic", "skipAwait", "timeout", "values")
    # `release`: the name Helm installs it under (the Release's `name` input, what `helm template <release>` needs);
    # `resource`: the Pulumi resource's name, which names the file.
    return [{"release": reg.inputs.get("name", reg.name), "resource": reg.name,
             **{k: _sorted(reg.inputs[k]) for k in keys if k in reg.inputs}}
            for reg in registrations if reg.type == HELM_RELEASE]


def write_charts(releases: list[dict[str, Any]], directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for release in releases:
        path = directory / f"{release['resource']}.yaml"
        path.write_text(_dump(release), encoding="utf-8")
        paths.append(path)
    return paths
