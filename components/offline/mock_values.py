"""Plausible computed values for mocked resources, so dependent resources resolve as they would."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import string
import uuid
from typing import Any

from gpucluster.catalog.arm_types import ARM_TYPES
from gpucluster.catalog.autonaming import name_property

SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"
"""The subscription the offline engine answers for (azure-native's getClientConfig under mocks)."""


def name_registries_offline() -> None:
    """Registry names from the offline engine's subscription (AZURE_SUBSCRIPTION_ID, components/spec/registry_name.py),
    whatever the caller's environment says: the shipped stacks' figures (the golden file, docs, benchmarks, tests)
    are the same on every machine."""
    os.environ["AZURE_SUBSCRIPTION_ID"] = SUBSCRIPTION


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("/".join(parts).encode()).digest()


def _pem(label: str, seed: str, size: int = 270) -> str:
    raw = (_digest(label, seed) * (size // 32 + 1))[:size]
    body = base64.b64encode(raw).decode()
    lines = "\n".join(body[i:i + 64] for i in range(0, len(body), 64))
    return f"-----BEGIN {label}-----\n{lines}\n-----END {label}-----\n"


def _random_string(name: str, inputs: dict[str, Any]) -> str:
    alphabet = ""
    if inputs.get("lower", True):
        alphabet += string.ascii_lowercase
    if inputs.get("upper", True):
        alphabet += string.ascii_uppercase
    if inputs.get("numeric", inputs.get("number", True)):
        alphabet += string.digits
    alphabet = alphabet or string.ascii_lowercase
    seed = _digest("random", name)
    return "".join(alphabet[seed[i % 32] % len(alphabet)] for i in range(int(inputs.get("length", 16))))


def _azure_name(typ: str, name: str, inputs: dict[str, Any]) -> str:
    prop = name_property(typ)
    if prop is not None and isinstance(inputs.get(prop), str):
        return inputs[prop]
    kind = typ.rsplit(":", 1)[-1].lower()
    for key, value in inputs.items():
        if key.lower() == f"{kind}name" and isinstance(value, str):
            return value
    return name


def _azure_id(typ: str, name: str, inputs: dict[str, Any]) -> str:
    """The resource's ARM id, from its type's path template (components/catalog/arm_types.py) filled from its inputs:
    the provider's namespace casing and plural, parents and scope as Azure builds the id."""
    row = ARM_TYPES.get(typ)
    leaf = _azure_name(typ, name, inputs)
    if row is None:  # an uncatalogued type: the preflight names it (name-type-catalogued)
        return f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{inputs.get('resourceGroupName') or name}/{typ}/{leaf}"
    prop = name_property(typ)

    def fill(match: re.Match[str]) -> str:
        key = match.group(1)
        if key == "subscriptionId":
            return SUBSCRIPTION
        if key == "scope":
            return str(inputs.get("scope") or f"/subscriptions/{SUBSCRIPTION}").lstrip("/")
        if key == prop:
            return leaf
        value = inputs.get(key)
        return value if isinstance(value, str) and value else leaf if key == "resourceGroupName" else key

    return re.sub(r"\{([^}]+)\}", fill, row.path)


TENANT = "11111111-1111-1111-1111-111111111111"


def invoke_result(token: str) -> dict[str, Any]:
    """Answers to the provider functions the program calls."""
    if token == "azure-native:authorization:getClientConfig":
        return {"subscriptionId": SUBSCRIPTION, "tenantId": TENANT, "clientId": TENANT, "objectId": TENANT}
    if token == "azure-native:monitor:getDataCollectionRule":
        return {"immutableId": "[at deploy: data collection rule immutable id]"}
    if token == "azure-native:monitor:getDataCollectionEndpoint":
        return {"metricsIngestion": {"endpoint": "[at deploy: metrics ingestion endpoint]"}}
    return {}


def computed_state(typ: str, name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(id, outputs) for a mocked resource: its inputs plus what the provider would compute."""
    state = dict(inputs)
    if typ.startswith("azure-native:"):
        resource_id = _azure_id(typ, name, inputs)
        state.setdefault("name", _azure_name(typ, name, inputs))
        identity = inputs.get("identity")
        if isinstance(identity, dict) and isinstance(identity.get("userAssignedIdentities"), list):
            # Inputs name the identities; the provider answers with a map keyed by their ids.
            identity = {**identity, "userAssignedIdentities": {i: {} for i in identity["userAssignedIdentities"]
                                                               if isinstance(i, str)}}
            state["identity"] = identity
        if isinstance(identity, dict) and "SystemAssigned" in str(identity.get("type", "")):
            state["identity"] = {**identity, "principalId": str(uuid.uuid5(uuid.NAMESPACE_URL, resource_id)),
                                 "tenantId": TENANT}
        if typ == "azure-native:managedidentity:UserAssignedIdentity":
            state.update(clientId=str(uuid.uuid5(uuid.NAMESPACE_URL, resource_id + "/client")),
                         principalId=str(uuid.uuid5(uuid.NAMESPACE_URL, resource_id)), tenantId=TENANT)
        if typ == "azure-native:monitor:AzureMonitorWorkspace":
            # Azure creates the workspace's default endpoint and rule in a managed resource group.
            managed = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/MA_{state['name']}_managed/providers/Microsoft.Insights"
            state["defaultIngestionSettings"] = {
                "dataCollectionEndpointResourceId": f"{managed}/dataCollectionEndpoints/{state['name']}",
                "dataCollectionRuleResourceId": f"{managed}/dataCollectionRules/{state['name']}"}
        if typ == "azure-native:keyvault:Key":
            uri = f"https://{inputs.get('vaultName')}.vault.azure.net/keys/{state['name']}"
            state.update(keyUri=uri, keyUriWithVersion=f"{uri}/{_digest(resource_id).hex()[:32]}")
        if typ.endswith(":LoadBalancer"):
            configs = inputs.get("frontendIPConfigurations") or []
            state["frontendIPConfigurations"] = [{**c, "id": f"{resource_id}/frontendIPConfigurations/{c.get('name')}"}
                                                 for c in configs]
        return resource_id, state
    if typ == "tls:index/privateKey:PrivateKey":
        state.update(privateKeyPem=_pem("PRIVATE KEY", name, 1190), publicKeyPem=_pem("PUBLIC KEY", name),
                     publicKeyOpenssh=f"ssh-rsa {base64.b64encode(_digest('ssh', name) * 8).decode()} {name}\n",
                     publicKeyFingerprintSha256=base64.b64encode(_digest("fp", name)).decode())
        return name, state
    if typ in ("tls:index/selfSignedCert:SelfSignedCert", "tls:index/locallySignedCert:LocallySignedCert"):
        state["certPem"] = _pem("CERTIFICATE", name, 900)
        return name, state
    if typ == "tls:index/certRequest:CertRequest":
        state["certRequestPem"] = _pem("CERTIFICATE REQUEST", name, 600)
        return name, state
    if typ.startswith("random:index/random"):
        state["result"] = _random_string(name, inputs)
        return name, state
    if typ.startswith("pulumi-python:dynamic") and isinstance(inputs.get("armType"), str):
        # A dynamic resource declaring its ARM type (node scale sets): the id Azure gives it.
        sub = inputs.get("subscriptionId") or SUBSCRIPTION
        leaf = inputs.get("vmScaleSetName") or inputs.get("interconnectBlockName") or name
        return (f"/subscriptions/{sub}/resourceGroups/{inputs.get('resourceGroupName')}/providers/"
                f"{inputs['armType']}/{leaf}", state)
    if typ.startswith("kubernetes:"):
        metadata = dict(inputs.get("metadata") or {})
        metadata.setdefault("name", name)
        state["metadata"] = metadata
        return f"{metadata.get('namespace', '')}/{metadata['name']}".lstrip("/"), state
    return f"{name}-id", state
