"""Validate Kubernetes objects: core kinds with kubernetes-validate (strict), custom resources against
the upstream CRD schemas vendored in components/kubernetes/crds/."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

from tests.support.stacks import ROOT

CRD_ROOT = ROOT / "components" / "kubernetes" / "crds"
KUBERNETES_VERSION = "1.36.0"


@cache
def crd_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> openAPIV3Schema of every served version of every vendored CRD."""
    schemas = {}
    for path in sorted(CRD_ROOT.glob("*/*.yaml")):
        crd = yaml.safe_load(path.read_text())
        for version in crd["spec"]["versions"]:
            if version.get("served"):
                key = (f"{crd['spec']['group']}/{version['name']}", crd["spec"]["names"]["kind"])
                schemas[key] = version["schema"]["openAPIV3Schema"]
    return schemas


NOT_VENDORED = {("kueue.x-k8s.io/v1beta2", "AdmissionCheck"), ("kueue.x-k8s.io/v1beta2", "ProvisioningRequestConfig")}
"""Kueue v0.19.2 kinds whose CRD schemas (config/components/crd/bases) are not among the shared schemas vendored
here: their fields are the ones Kueue's provisioning docs and controller read (tests/test_scale_from_zero.py)."""


OPERATOR_REGISTERED = {("cilium.io/v2", "CiliumClusterwideNetworkPolicy")}
"""Cilium's kinds, whose CRDs cilium-operator registers at start (not vendored): tests/test_imds_guard.py judges the
policies with Cilium's own rules instead."""


def validate_object(obj: dict[str, Any]) -> None:
    """Raises on an invalid object; a custom kind with no vendored schema is an error too."""
    key = (obj["apiVersion"], obj["kind"])
    if key in NOT_VENDORED or key in OPERATOR_REGISTERED:
        return
    if key in crd_schemas():
        jsonschema.validate(obj, crd_schemas()[key])
        return
    group = obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else ""
    if group.endswith(".x-k8s.io") or group.endswith(".nvidia.com"):
        raise AssertionError(f"no vendored schema for {key}")
    kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def shared_schema_dir() -> Path:
    return ROOT.parent / "shared" / "schemas"
