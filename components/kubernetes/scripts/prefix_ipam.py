"""Feeds Cilium's CRD-backed IPAM (`ipam: crd`) with the /28 blocks Azure put on each node's NIC.
Standard library only, like health_agent.py.

Cilium's Azure IPAM allocates single secondary addresses (its `IsPrefixDelegated()` is false; cilium#46072),
and in `ipam: crd` mode an agent takes the addresses another component publishes in its node's
`CiliumNode.spec.ipam.pool`. This controller is that component. One loop, run by the holder of a
coordination.k8s.io/v1 Lease:

  1. list the nodes; group them by scale set from `spec.providerID`
     (`azure:///subscriptions/S/resourceGroups/RG/providers/Microsoft.Compute/virtualMachineScaleSets/SET/virtualMachines/N`)
  2. per scale set ONE ARM read, not one per VM (ARM throttles reads per subscription and region; 7,500 nodes
     are 43 scale sets in prod): Microsoft.Network `NetworkInterfaces_ListVirtualMachineScaleSetNetworkInterfaces`,
     GET .../virtualMachineScaleSets/SET/networkInterfaces?api-version=ARM_API_VERSION, following `nextLink`
  3. map each NIC to its instance (`properties.virtualMachine.id`, else the NIC id's path), take the blocks of
     its IP configurations (`privateIPAddress` "a.b.c.d/28", or an address with `privateIPAddressPrefixLength`),
     expand them to their 16 addresses
  4. merge-patch `CiliumNode/<node>` `spec.ipam.pool`: add what is missing, drop (null) what is no longer on the
     NIC and not in use (`status.ipam.used`); nothing at all when the pool already matches (idempotent)
"""

from __future__ import annotations

import json
import os
import re
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from ipaddress import IPv4Network
from typing import Any

ARM = "https://management.azure.com"
ARM_API_VERSION = "2018-10-01"
"""The api-version of the scale-set NIC operations, kept at 2018-10-01 in later Microsoft.Network specs (the
samples generated from azure-rest-api-specs `stable/2022-05-01/examples/VmssNetworkInterfaceList.json` call it
with 2018-10-01). Whether its responses carry the prefix is not settled by a public source: the parser reads
both shapes the 2024-03-01+ model documents ("a single IP address or a CIDR block")."""
IMDS_TOKEN = "http://169.254.169.254/metadata/identity/oauth2/token"
API = os.environ.get("KUBE_API", "https://kubernetes.default.svc")
"""The Deployment sets the API server endpoint by name: the controller runs on the host network (it cannot wait
for a pod address it hands out itself), where cluster DNS does not answer, as Cilium's agent does."""
SA = "/var/run/secrets/kubernetes.io/serviceaccount"
LEASE_SECONDS = 30
SYNC_SECONDS = 30

_PROVIDER_ID = re.compile(
    r"^azure:///subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)/providers/Microsoft\.Compute/"
    r"virtualMachineScaleSets/(?P<set>[^/]+)/virtualMachines/(?P<instance>\d+)$", re.IGNORECASE)
_VM_PATH = re.compile(r"/virtualMachineScaleSets/(?P<set>[^/]+)/virtualMachines/(?P<instance>\d+)(/|$)",
                      re.IGNORECASE)

Instance = tuple[str, str]
"""(scale set name lowercased, instance id)."""


# Pure decisions (tested on recorded responses, without Azure or a cluster).

def instance_of_node(node: dict[str, Any]) -> tuple[str, str, str, str] | None:
    """(subscription, resource group, scale set, instance) from a node's providerID; None if not a scale-set VM."""
    match = _PROVIDER_ID.match(str(node.get("spec", {}).get("providerID") or ""))
    if match is None:
        return None
    return match["sub"], match["rg"], match["set"], match["instance"]


def instance_of_nic(nic: dict[str, Any]) -> Instance | None:
    vm = str((nic.get("properties", {}).get("virtualMachine") or {}).get("id") or nic.get("id") or "")
    match = _VM_PATH.search(vm)
    return (match["set"].lower(), match["instance"]) if match else None


def nic_blocks(nic: dict[str, Any]) -> list[IPv4Network]:
    """The pod addresses on a NIC's IP configurations: each /28 block, and each single secondary address (the API
    servers' NICs carry a few); the primary is the node's own."""
    blocks = []
    for config in nic.get("properties", {}).get("ipConfigurations") or []:
        props = config.get("properties", {})
        address = str(props.get("privateIPAddress") or "")
        length = props.get("privateIPAddressPrefixLength")
        if not address or props.get("primary"):
            continue
        if "/" in address:
            blocks.append(IPv4Network(address, strict=False))
        else:
            blocks.append(IPv4Network(f"{address}/{int(length) if length else 32}", strict=False))
    return sorted(blocks)


def blocks_by_instance(nics: list[dict[str, Any]]) -> dict[Instance, list[IPv4Network]]:
    found: dict[Instance, list[IPv4Network]] = {}
    for nic in nics:
        instance = instance_of_nic(nic)
        if instance is not None:
            found.setdefault(instance, []).extend(nic_blocks(nic))
    return {key: sorted(value) for key, value in found.items()}


def expand(blocks: list[IPv4Network]) -> list[str]:
    """Every address of every block: Azure hands the whole /28 to the NIC (16 pod addresses)."""
    return [str(address) for block in blocks for address in block]


def pool_patch(cilium_node: dict[str, Any], desired: list[str]) -> dict[str, Any] | None:
    """The merge patch that makes `spec.ipam.pool` hold `desired`; None when it already does. An address no longer
    on the NIC is dropped only when no endpoint uses it (`status.ipam.used`)."""
    current = set((cilium_node.get("spec", {}).get("ipam", {}).get("pool") or {}).keys())
    used = set((cilium_node.get("status", {}).get("ipam", {}).get("used") or {}).keys())
    wanted = set(desired)
    change: dict[str, Any] = {ip: {} for ip in sorted(wanted - current)}
    change.update({ip: None for ip in sorted(current - wanted - used)})
    return {"spec": {"ipam": {"pool": change}}} if change else None


def sync_plan(nodes: list[dict[str, Any]], cilium_nodes: dict[str, dict[str, Any]],
              list_nics: Callable[[str, str, str], list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Patches per CiliumNode name. `list_nics(subscription, resource group, scale set)` is called once per
    scale set that has nodes."""
    by_set: dict[tuple[str, str, str], list[tuple[str, str]]] = {}
    for node in nodes:
        where = instance_of_node(node)
        if where is not None:
            sub, rg, scale_set, instance = where
            by_set.setdefault((sub, rg, scale_set), []).append((node["metadata"]["name"], instance))
    patches: dict[str, dict[str, Any]] = {}
    for (sub, rg, scale_set), members in sorted(by_set.items()):
        blocks = blocks_by_instance(list_nics(sub, rg, scale_set))
        for name, instance in members:
            found = blocks.get((scale_set.lower(), instance))
            cilium_node = cilium_nodes.get(name)
            if not found or cilium_node is None:
                continue  # NIC not provisioned yet, or the agent has not created its CiliumNode: next round
            patch = pool_patch(cilium_node, expand(found))
            if patch is not None:
                patches[name] = patch
    return patches


def _parse_time(value: str | None) -> float | None:
    """A MicroTime (`2026-11-22T01:00:00.123456Z`) or Time as seconds since the epoch."""
    if not value:
        return None
    text = value.rstrip("Z")
    pattern = "%Y-%m-%dT%H:%M:%S.%f" if "." in text else "%Y-%m-%dT%H:%M:%S"
    return datetime.strptime(text, pattern).replace(tzinfo=UTC).timestamp()


def lease_action(lease: dict[str, Any] | None, me: str, now: float) -> str:
    """`create` (no lease), `renew` (ours), `take` (expired), `wait` (another holder's, still valid)."""
    if lease is None:
        return "create"
    spec = lease.get("spec", {})
    if spec.get("holderIdentity") == me:
        return "renew"
    renewed = _parse_time(spec.get("renewTime"))
    duration = int(spec.get("leaseDurationSeconds") or LEASE_SECONDS)
    if not spec.get("holderIdentity") or renewed is None or now > renewed + duration:
        return "take"
    return "wait"


def micro_time(now: float) -> str:
    """A MicroTime as the API server writes it (RFC 3339 with microseconds)."""
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# Calls (thin; not unit-tested).

def _kube(method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
    with open(f"{SA}/token") as f:
        token = f.read()
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(API + path, data=data, method=method,
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": content_type})
    context = ssl.create_default_context(cafile=f"{SA}/ca.crt")
    with urllib.request.urlopen(request, context=context, timeout=30) as response:
        return json.loads(response.read() or b"null")


def _arm_token(client_id: str) -> str:
    query = urllib.parse.urlencode({"api-version": "2018-02-01", "resource": ARM + "/", "client_id": client_id})
    request = urllib.request.Request(f"{IMDS_TOKEN}?{query}", headers={"Metadata": "true"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())["access_token"]


def _arm_lister(client_id: str) -> Callable[[str, str, str], list[dict[str, Any]]]:
    def list_nics(sub: str, rg: str, scale_set: str) -> list[dict[str, Any]]:
        token = _arm_token(client_id)
        url: str | None = (f"{ARM}/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/"
                           f"virtualMachineScaleSets/{scale_set}/networkInterfaces?api-version={ARM_API_VERSION}")
        nics: list[dict[str, Any]] = []
        while url:
            request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(request, timeout=60) as response:
                page = json.loads(response.read())
            nics += page.get("value") or []
            url = page.get("nextLink")
        return nics
    return list_nics


def _lead(namespace: str, name: str, me: str) -> bool:
    path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    try:
        lease = _kube("GET", f"{path}/{name}")
    except urllib.error.HTTPError as error:
        if error.code != 404:
            raise
        lease = None
    now = time.time()
    action = lease_action(lease, me, now)
    if action == "wait":
        return False
    spec = {"holderIdentity": me, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": micro_time(now)}
    if action == "create":
        _kube("POST", path, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                             "metadata": {"name": name, "namespace": namespace},
                             "spec": {**spec, "acquireTime": micro_time(now)}})
    else:
        assert lease is not None
        # resourceVersion makes a lost race a 409 instead of two leaders
        lease["spec"] = {**lease.get("spec", {}), **spec, **({"acquireTime": micro_time(now)} if action == "take" else {})}
        _kube("PUT", f"{path}/{name}", lease)
    return True


def run(namespace: str, lease_name: str, client_id: str) -> int:
    me = os.environ.get("POD_NAME") or os.uname().nodename
    list_nics = _arm_lister(client_id)
    while True:
        try:
            if _lead(namespace, lease_name, me):
                nodes = _kube("GET", "/api/v1/nodes")["items"]
                cilium = {n["metadata"]["name"]: n for n in _kube("GET", "/apis/cilium.io/v2/ciliumnodes")["items"]}
                for name, patch in sync_plan(nodes, cilium, list_nics).items():
                    _kube("PATCH", f"/apis/cilium.io/v2/ciliumnodes/{name}", patch, "application/merge-patch+json")
        except (urllib.error.URLError, OSError, KeyError, ValueError) as error:
            print(f"prefix-ipam: {error}", file=sys.stderr, flush=True)
        time.sleep(SYNC_SECONDS)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1], sys.argv[2], os.environ["AZURE_CLIENT_ID"]))
