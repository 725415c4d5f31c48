"""out/<stack>/manifests/ applies on its own with `kubectl apply -f <folder>`, which reads the folder's files in
name order (kubectl `pkg/cmd/util/resource` FileVisitor over filepath.Walk, lexical order): every object finds,
in a file before it, what the API server needs to admit it.

- Its kind: built in (kubernetes-validate's schemas for Kubernetes 1.36, the project's consumer pin) or defined
  by a CustomResourceDefinition earlier; else "no matches for kind".
- Its namespace: one the API server creates itself (kube-system, kube-public, kube-node-lease, default:
  kubernetes/kubernetes pkg/controlplane/controller/systemnamespaces) or a Namespace earlier.
- Every priorityClassName in it: one of the two the API server creates (system-cluster-critical,
  system-node-critical: pkg/apis/scheduling/types.go, pkg/registry/scheduling/rest/storage_scheduling.go) or a
  PriorityClass earlier; else the Priority admission plugin refuses its pods (plugin/pkg/admission/priority).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from gpucluster.offline.crds import group_of
from gpucluster.offline.engine import ProgramRun
from gpucluster.offline.manifests import kubernetes_objects, write_manifests
from tests.support.manifest_validation import KUBERNETES_VERSION

SYSTEM_NAMESPACES = {"default", "kube-system", "kube-public", "kube-node-lease"}
SYSTEM_PRIORITY_CLASSES = {"system-cluster-critical", "system-node-critical"}


def _builtin(obj: dict[str, Any]) -> bool:
    group = group_of(obj["apiVersion"])
    if group and "." in group and not group.endswith(".k8s.io"):
        return False  # kubernetes-validate strips a group to its first label: never take `x.example.com` as `x`
    try:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        return False
    return True


def _priority_classes(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "priorityClassName" and isinstance(item, str):
                yield item
            else:
                yield from _priority_classes(item)
    elif isinstance(value, list):
        for item in value:
            yield from _priority_classes(item)


CHART_ONLY_KINDS = {("kueue.x-k8s.io", "AdmissionCheck"), ("kueue.x-k8s.io", "ProvisioningRequestConfig"),
                    ("cilium.io", "CiliumClusterwideNetworkPolicy")}
"""Kinds whose CRDs only a chart brings, Kueue's or Cilium's (cilium-operator registers its CRDs when it starts):
they are not among the vendored schemas (components/kubernetes/crds, copies of the shared Kueue v0.19.2 schemas), so
manifests/ cannot define them; README says these objects need those CRDs installed first. Any other custom kind must
be defined earlier in the folder."""


def assert_applies_in_order(folder: Path) -> list[str]:
    served: dict[tuple[str, str], set[str]] = {}
    """(group, kind) -> versions served, of each CRD so far."""
    used: set[tuple[str, str]] = set()
    namespaces = set(SYSTEM_NAMESPACES)
    priority_classes = set(SYSTEM_PRIORITY_CLASSES)
    names = sorted(p.name for p in folder.iterdir())
    for name in names:
        [obj] = list(yaml.safe_load_all((folder / name).read_text()))
        key = (group_of(obj["apiVersion"]), obj["kind"])
        version = obj["apiVersion"].rsplit("/", 1)[-1]
        assert _builtin(obj) or key in CHART_ONLY_KINDS or version in served.get(key, set()), \
            f"{name}: kind {obj['apiVersion']} {obj['kind']} is neither built in nor defined earlier"
        used.add(key)
        namespace = obj["metadata"].get("namespace")
        assert namespace is None or namespace in namespaces, f"{name}: namespace {namespace} is not created earlier"
        for needed in _priority_classes(obj.get("spec")):
            assert needed in priority_classes, f"{name}: priorityClassName {needed} is not defined earlier"
        if obj["kind"] == "CustomResourceDefinition":
            spec = obj["spec"]
            served[(spec["group"], spec["names"]["kind"])] = {v["name"] for v in spec["versions"] if v.get("served")}
        elif obj["kind"] == "Namespace":
            namespaces.add(obj["metadata"]["name"])
        elif obj["kind"] == "PriorityClass":
            priority_classes.add(obj["metadata"]["name"])
    assert set(served) <= used, f"CRDs of kinds no object uses: {sorted(set(served) - used)}"
    return names


def test_dev_manifests_apply_in_file_name_order(dev_out: Path) -> None:
    """Before: no CRDs for the Kueue objects, and PriorityClasses ranked after the workloads that use them."""
    names = assert_applies_in_order(dev_out / "manifests")
    assert any("-customresourcedefinition-clusterqueues.kueue.x-k8s.io" in n for n in names)


def test_prod_manifests_apply_in_file_name_order(prod_run: ProgramRun, tmp_path: Path) -> None:
    write_manifests(kubernetes_objects(prod_run.registrations), tmp_path)
    names = assert_applies_in_order(tmp_path)
    kinds = [n.split("-")[1] for n in names]
    assert kinds.index("priorityclass") < kinds.index("namespace") < kinds.index("customresourcedefinition") \
        < kinds.index("clusterrole") < kinds.index("deployment")


@pytest.mark.parametrize("kind", ["PriorityClass", "Namespace", "CustomResourceDefinition"])
def test_an_object_before_what_it_needs_fails_the_check(dev_out: Path, tmp_path: Path, kind: str) -> None:
    """The check can fail: the folder with one kind renamed to sort after everything."""
    folder = tmp_path / "manifests"
    folder.mkdir()
    for path in (dev_out / "manifests").iterdir():
        text = path.read_text()
        moved = yaml.safe_load(text)["kind"] == kind
        (folder / (f"99-{path.name[3:]}" if moved else path.name)).write_text(text)
    with pytest.raises(AssertionError, match="earlier"):
        assert_applies_in_order(folder)
