"""Only the pods that sign in to Azure with a VM's managed identity reach IMDS.

IMDS (169.254.169.254) hands a token for any identity attached to the VM to any process that asks, pods on the pod
network included; the add-on identities are attached to the system pool's scale sets (docs/capacity.md). A
CiliumClusterwideNetworkPolicy denies egress to it for every endpoint but the accounts whose pods use a managed
identity, read from the rendered pods themselves (`ARM_USE_MANAGED_IDENTITY_EXTENSION=true` in the environment, or a
mounted cloud config with `useManagedIdentityExtension: true`).

Consumer: Cilium 1.20 (cilium `pkg/policy/api/rule.go`): `egressDeny` wins over any allow; `enableDefaultDeny` is
true by default for a direction that has rules, deny rules included, so both directions are set false here and
nothing else is dropped. An endpoint's labels carry its namespace (`io.kubernetes.pod.namespace`) and service
account (`io.cilium.k8s.policy.serviceaccount`) from the `k8s` source (cilium `pkg/k8s/apis/cilium.io/const.go`):
a pod can set its own labels but not those two, so the exemption is by account, never by pod label. Host-network
pods (the prefix IPAM controller, cilium-operator) are not endpoints: this policy does not cover them.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import yaml

from gpucluster.kubernetes.objects.common import Object, obj
from gpucluster.kubernetes.objects.images import pod_spec

API, KIND = "cilium.io/v2", "CiliumClusterwideNetworkPolicy"
IMDS_CIDR = "169.254.169.254/32"
NAME = "gpucluster-imds"
NAMESPACE_LABEL = "k8s:io.kubernetes.pod.namespace"
ACCOUNT_LABEL = "k8s:io.cilium.k8s.policy.serviceaccount"
_OFF = {"ingress": False, "egress": False}
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _config_maps(objects: list[Object]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): o.get("data") or {}
            for o in objects if o["kind"] == "ConfigMap"}


def uses_managed_identity(pod: dict[str, Any], namespace: str, config_maps: dict[tuple[str, str], dict[str, Any]]
                          ) -> bool:
    """The Azure SDK's managed-identity switch in its environment, or a mounted cloud config that sets it
    (cloud-provider-azure `useManagedIdentityExtension`)."""
    for container in [*(pod.get("containers") or []), *(pod.get("initContainers") or [])]:
        if any(e.get("name") == "ARM_USE_MANAGED_IDENTITY_EXTENSION" and str(e.get("value")).lower() == "true"
               for e in container.get("env") or []):
            return True
    for volume in pod.get("volumes") or []:
        data = config_maps.get((namespace, (volume.get("configMap") or {}).get("name", "")), {})
        for text in data.values():
            if _prometheus_signs_in(str(text)):
                return True
            try:
                config = json.loads(str(text))
            except ValueError:
                continue
            if isinstance(config, dict) and config.get("useManagedIdentityExtension") is True:
                return True
    return False


@lru_cache(maxsize=256)
def _prometheus_signs_in(text: str) -> bool:
    """A mounted Prometheus config whose remote write signs in with a managed identity (`azuread.managed_identity`,
    prometheus storage/remote/azuread/azuread.go). Read by libyaml, once per text: a plan asks for the layer's
    objects several times (the program, the first-boot simulation, the architecture check)."""
    try:
        config = yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError:
        return False
    writes = config.get("remote_write") if isinstance(config, dict) else None
    return isinstance(writes, list) and any(
        isinstance(w, dict) and isinstance(w.get("azuread"), dict) and "managed_identity" in w["azuread"]
        for w in writes)


def identity_accounts(objects: list[Object]) -> dict[str, set[str]]:
    """Namespace -> the service accounts of pod-network workloads that sign in with a managed identity."""
    maps = _config_maps(objects)
    found: dict[str, set[str]] = {}
    for o in objects:
        pod = pod_spec(o)
        namespace = o["metadata"].get("namespace", "default")
        if pod is None or pod.get("hostNetwork") or not uses_managed_identity(pod, namespace, maps):
            continue
        found.setdefault(namespace, set()).add(pod.get("serviceAccountName") or "default")
    return found


def _deny(selector: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "endpointSelector": selector, "enableDefaultDeny": dict(_OFF),
            "egressDeny": [{"toCIDR": [IMDS_CIDR]}]}


def imds_policy(objects: list[Object]) -> list[Object]:
    """Clusterwide policies: every namespace but the identities' denied outright, and in each of theirs every
    other account."""
    accounts = identity_accounts(objects)
    spaces = sorted(accounts)
    everywhere = _deny({"matchExpressions": [{"key": NAMESPACE_LABEL, "operator": "NotIn", "values": spaces}]}
                       if spaces else {}, "no pod outside the identities' namespaces reaches IMDS")
    return [obj(API, KIND, NAME, spec=everywhere), *(obj(API, KIND, f"{NAME}-{ns}", spec=_deny(
        {"matchLabels": {NAMESPACE_LABEL: ns},
         "matchExpressions": [{"key": ACCOUNT_LABEL, "operator": "NotIn", "values": sorted(accounts[ns])}]},
        f"in {ns}, only {', '.join(sorted(accounts[ns]))} reach IMDS")) for ns in spaces)]
