"""Feeds Cilium's CRD-backed IPAM (`ipam: crd`) with the /28 blocks Azure put on each node's NIC.
Standard library only (with kube_client.py, shipped beside it in the agents image).

Cilium's Azure IPAM allocates single secondary addresses (its `IsPrefixDelegated()` is false; cilium#46072),
and in `ipam: crd` mode an agent takes the addresses another component publishes in its node's
`CiliumNode.spec.ipam.pool`. This controller is that component. One round, run by the holder of a
coordination.k8s.io/v1 Lease (`Leader`):

  1. bring its map of the nodes up to date: name -> (subscription, group, scale set, instance) from
     `spec.providerID`, listed in pages (limit 500) the first time and after a 410 Gone, else followed by a
     one-second watch from the last version seen (`Mirror`)
     (`azure:///subscriptions/S/resourceGroups/RG/providers/Microsoft.Compute/virtualMachineScaleSets/SET/virtualMachines/N`)
  2. per scale set ONE ARM list, not one per VM (43 scale sets in prod): Microsoft.Network
     `NetworkInterfaces_ListVirtualMachineScaleSetNetworkInterfaces`,
     GET .../virtualMachineScaleSets/SET/networkInterfaces?api-version=ARM_API_VERSION, following `nextLink`
     (same host only, each link once, at most MAX_PAGES). A scale set whose read fails (429, 5xx, timeout,
     unreadable page) is skipped for the round and backs off on its own (Retry-After when given); the others go on.
  3. map each NIC to its instance (`properties.virtualMachine.id`, else the NIC id's path) and take the blocks of
     its IP configurations (`privateIPAddress` "a.b.c.d/28", or an address with `privateIPAddressPrefixLength`);
     only blocks of the expected length and single addresses are accepted
  4. bring its map of the CiliumNodes up to date the same way, and merge-patch `spec.ipam.pool` of each whose
     scale set was read in full: add
     what is missing, drop (null) what is no longer on the NIC and not in use (`status.ipam.used`), also when the
     NIC lists no block at all; the patch carries the resourceVersion it was computed from, so a concurrent edit is
     a 409 and waits for the next round. One address is never in two pools: a block listed on two NICs goes to
     neither (logged as an ALERT), and an address another CiliumNode's pool still holds is added only once that
     pool has dropped it (a later round).
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from ipaddress import IPv4Network
from typing import Any

if __package__:
    from . import kube_client as kc
else:  # the agents image: the scripts side by side in /opt/gpucluster
    import kube_client as kc  # type: ignore[no-redef]

ARM = os.environ.get("ARM_ENDPOINT", "https://management.azure.com").rstrip("/")
ARM_RESOURCE = "https://management.azure.com/"
"""The token's audience: the public cloud's ARM, whatever endpoint the requests go to."""
ARM_API_VERSION = "2024-03-01"
"""The Microsoft.Network api-version the NICs are read at. ARM shapes a response by the api-version asked for, and the
NIC IP configuration's `privateIPAddressPrefixLength` is in the 2024-03-01 model (Azure/azure-rest-api-specs
commit 0c9da75c, specification/network/resource-manager/Microsoft.Network/stable/2024-03-01/networkInterface.json,
`NetworkInterfaceIPConfigurationPropertiesFormat`: "If specified and the allocation method is dynamic, the service
will allocate a CIDR block instead of a single IP address"). The controller used to read at 2018-10-01, a version
older than the field, where a block could come back as its first address alone."""
BLOCK_CONFIG_PREFIX = "podblock"
"""IP configurations the plan declares as /28 blocks are named `podblockNN` (components/azure/scale_set/body.py); one that
comes back without its length is refused, never read as a /32 (tests/test_prefix_ipam_api_version.py)."""
IMDS_TOKEN = os.environ.get("IMDS_TOKEN_ENDPOINT", "http://169.254.169.254/metadata/identity/oauth2/token")
LEASE_SECONDS = 30
SYNC_SECONDS = 30
MAX_PAGES = 50
"""NIC pages per scale set: a scale set holds at most 1,000 VMs; more pages than this is a loop."""
PREFIX_LENGTH = 28

_NAME = r"[A-Za-z0-9][A-Za-z0-9._()-]{0,89}"
"""ARM names of resource groups and scale sets: letters, digits, '.', '_', '(', ')', '-' (no '/', '?', '%')."""
_PROVIDER_ID = re.compile(
    r"^azure:///subscriptions/(?P<sub>[0-9A-Fa-f-]{36})/resourceGroups/(?P<rg>" + _NAME + r")/providers/"
    r"Microsoft\.Compute/virtualMachineScaleSets/(?P<set>" + _NAME + r")/virtualMachines/(?P<instance>\d{1,9})$",
    re.IGNORECASE)
_VM_PATH = re.compile(r"/virtualMachineScaleSets/(?P<set>[^/]+)/virtualMachines/(?P<instance>\d+)(/|$)",
                      re.IGNORECASE)
_NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")

Instance = tuple[str, str]
"""(scale set name lowercased, instance id)."""
Where = tuple[str, str, str, str]
"""(subscription, resource group, scale set, instance)."""


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


# Pure decisions (tested on recorded responses, without Azure or a cluster).

def instance_of_node(node: dict[str, Any]) -> Where | None:
    """(subscription, resource group, scale set, instance) from a node's providerID; None if not a scale-set VM
    or if any part holds characters ARM names cannot (it goes into a URL)."""
    match = _PROVIDER_ID.match(str(_dict(node.get("spec")).get("providerID") or ""))
    if match is None:
        return None
    return match["sub"], match["rg"], match["set"], match["instance"]


def instance_of_nic(nic: dict[str, Any]) -> Instance | None:
    vm = str(_dict(_dict(nic.get("properties")).get("virtualMachine")).get("id") or nic.get("id") or "")
    match = _VM_PATH.search(vm)
    return (match["set"].lower(), match["instance"]) if match else None


def nic_blocks(nic: dict[str, Any], prefix_length: int = PREFIX_LENGTH,
               rejected: list[str] | None = None) -> list[IPv4Network]:
    """The pod addresses on a NIC's IP configurations: each /`prefix_length` block, and each single secondary
    address (the API servers' NICs carry a few); the primary is the node's own. Anything else (a /8 "block", an
    IPv6 or unreadable address) is left out and named in `rejected`."""
    blocks = []
    for config in _list(_dict(nic.get("properties")).get("ipConfigurations")):
        props = _dict(_dict(config).get("properties"))
        address = str(props.get("privateIPAddress") or "")
        length = props.get("privateIPAddressPrefixLength")
        if not address or props.get("primary"):
            continue
        if length is None and "/" not in address and str(_dict(config).get("name") or "").startswith(BLOCK_CONFIG_PREFIX):
            raise MissingPrefixLengthError(f"{_dict(config).get('name')} {address}")
        bits = kc.whole_number(length, 0, 32) if length else 32  # 1e999, "²", True: not a prefix length
        try:
            block = IPv4Network(address if "/" in address else f"{address}/{bits}", strict=False) \
                if bits is not None else None
        except (ValueError, TypeError):
            block = None
        if block is None or block.prefixlen not in (prefix_length, 32):
            if rejected is not None:
                rejected.append(f"{address}" + (f" (prefix length {length})" if length else ""))
            continue
        blocks.append(block)
    return sorted(blocks)


class MissingPrefixLengthError(ValueError):
    """A configuration the plan declares as a block came back without its prefix length."""


def blocks_by_instance(nics: Iterable[dict[str, Any]], prefix_length: int = PREFIX_LENGTH,
                       rejected: list[str] | None = None, refused: list[str] | None = None,
                       unread: set[Instance] | None = None) -> dict[Instance, list[IPv4Network]]:
    """Blocks per instance. An instance with a declared block that came back without its length is left out, named
    in `refused` and added to `unread`: its CiliumNode is not changed (an instance merely absent from the answer has
    no blocks, and loses them)."""
    found: dict[Instance, list[IPv4Network]] = {}
    dropped: set[Instance] = set()
    for nic in nics:
        instance = instance_of_nic(_dict(nic))
        if instance is None:
            continue
        try:
            found.setdefault(instance, []).extend(nic_blocks(_dict(nic), prefix_length, rejected))
        except MissingPrefixLengthError as missing:
            dropped.add(instance)
            if unread is not None:
                unread.add(instance)
            if refused is not None:
                refused.append(f"instance {instance[1]}: {missing}")
    return {key: sorted(value) for key, value in found.items() if key not in dropped}


def expand(blocks: list[IPv4Network]) -> list[str]:
    """Every address of every block: Azure hands the whole /28 to the NIC (16 pod addresses). Integer arithmetic:
    a round expands 240,000 addresses at prod size, and ipaddress objects per address cost seconds."""
    found = []
    for block in blocks:
        start = int(block.network_address)
        found += [f"{n >> 24}.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}"
                  for n in range(start, start + block.num_addresses)]
    return found


def pool_patch(cilium_node: dict[str, Any], desired: list[str]) -> dict[str, Any] | None:
    """The merge patch that makes `spec.ipam.pool` hold `desired`; None when it already does. An address no longer
    on the NIC is dropped only when no endpoint uses it (`status.ipam.used`). The patch carries the resourceVersion
    it was computed from: if `used` changed since, the API server answers 409 instead of applying it."""
    current = set(_dict(_dict(_dict(cilium_node.get("spec")).get("ipam")).get("pool")))
    used = set(_dict(_dict(_dict(cilium_node.get("status")).get("ipam")).get("used")))
    wanted = set(desired)
    change: dict[str, Any] = {ip: {} for ip in sorted(wanted - current)}
    change.update({ip: None for ip in sorted(current - wanted - used)})
    if not change:
        return None
    patch: dict[str, Any] = {"spec": {"ipam": {"pool": change}}}
    version = _dict(cilium_node.get("metadata")).get("resourceVersion")
    if version:
        patch["metadata"] = {"resourceVersion": version}
    return patch


def sync_plan(nodes: list[dict[str, Any]], cilium_nodes: dict[str, dict[str, Any]],
              list_nics: Callable[[str, str, str], Iterable[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Patches per CiliumNode name, all in memory (for recorded responses; `Controller` streams the same
    decisions). `list_nics(subscription, resource group, scale set)` is called once per scale set with nodes."""
    members = {n["metadata"]["name"]: w for n in nodes if (w := instance_of_node(n)) is not None}
    reads = {key: blocks_by_instance(list_nics(*key)) for key in sorted({w[:3] for w in members.values()})}
    return dict(round_patches(members, reads, cilium_nodes).patches)


@dataclass
class Decision:
    patches: list[tuple[str, dict[str, Any]]]
    shared: set[IPv4Network]
    held: dict[str, str]


def round_patches(members: dict[str, Where], reads: dict[tuple[str, str, str], dict[Instance, list[IPv4Network]]],
                  cilium_nodes: dict[str, dict[str, Any]], unread: frozenset[Instance] | set[Instance] = frozenset()
                  ) -> Decision:
    """A round's patches: each CiliumNode of a scale set read in full gets its NIC's blocks, less blocks listed on
    two NICs (`shared`) and less addresses another pool still holds (`held`, added in a later round). Instances in
    `unread` (refused by `blocks_by_instance`) are left as they are."""
    shared = shared_blocks(reads.values())
    patches: list[tuple[str, dict[str, Any]]] = []
    for name, cilium_node in cilium_nodes.items():
        where = members.get(name)
        if where is None or where[:3] not in reads:
            continue  # not a scale-set node, or its scale set was not read in full this round
        if (where[2].lower(), where[3]) in unread:
            continue  # its NIC came back without a declared block's length: never read as an empty NIC
        found = reads[where[:3]].get((where[2].lower(), where[3])) or []
        patch = _node_patch(cilium_node, [b for b in found if b not in shared])
        if patch is not None:
            patches.append((name, patch))
    held = held_elsewhere(patches, ((n, _dict(_dict(c.get("spec")).get("ipam")).get("pool") or {})
                                    for n, c in cilium_nodes.items()))
    kept: list[tuple[str, dict[str, Any]]] = []
    for name, patch in patches:
        change = patch["spec"]["ipam"]["pool"]
        for ip in [ip for ip, value in change.items() if value is not None and ip in held]:
            del change[ip]
        if change:
            kept.append((name, patch))
    return Decision(kept, shared, held)


def _node_patch(cilium_node: dict[str, Any] | None, found: list[IPv4Network] | None) -> dict[str, Any] | None:
    """The node's patch from its NIC's blocks in a scale set read in full: a NIC with no block (or none listed)
    means no address is the node's any more, so its unused pool addresses go too."""
    if cilium_node is None:
        return None  # the agent has not created its CiliumNode yet: next round
    return pool_patch(cilium_node, expand(found or []))


def shared_blocks(reads: Iterable[dict[Instance, list[IPv4Network]]]) -> set[IPv4Network]:
    """Blocks that more than one NIC reports. Azure gives an address to one IP configuration at a time, so this is a
    listing caught mid-move or a fault: such a block goes to no pool (an alert, never two pools)."""
    seen: set[IPv4Network] = set()
    shared: set[IPv4Network] = set()
    for read in reads:
        for blocks in read.values():
            for block in set(blocks):
                (shared if block in seen else seen).add(block)
    return shared


def held_elsewhere(patches: list[tuple[str, dict[str, Any]]], pools: Iterable[tuple[str, Iterable[str]]]
                   ) -> dict[str, str]:
    """Addresses a patch would add that another CiliumNode's pool still holds, with that node: adding them now
    would put one address in two pools; they are added in a later round, once the other pool has let them go."""
    adding = {ip: name for name, patch in patches
              for ip, value in patch["spec"]["ipam"]["pool"].items() if value is not None}
    if not adding:
        return {}
    found: dict[str, str] = {}
    for name, pool in pools:
        for ip in adding.keys() & set(pool):
            if adding[ip] != name:
                found[ip] = name
    return found


def micro_time(now: float) -> str:
    """A MicroTime as the API server writes it (RFC 3339 with microseconds)."""
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# The leader lock.

@dataclass
class Leader:
    """A coordination.k8s.io/v1 Lease held the way client-go's leaderelection holds it: the holder renews every
    `retry` seconds and writes only within `renew_deadline` of its last successful renewal's start; another
    replica takes the lease only after the record it read has not changed for the record's
    `leaseDurationSeconds`, measured on its OWN monotonic clock from when it first saw that record, never from the
    holder's `renewTime` (clocks of two machines disagree). Every write carries the resourceVersion read, so of two
    replicas racing only one wins; the loser gets 409 and re-reads. Since `renew_deadline < lease_seconds`, a holder
    that stops renewing has stopped writing before anyone can take the lease.

    `start` renews in a thread of its own, as client-go runs its renew loop beside the work, so a round that takes
    longer than the lease (a slow NIC listing) neither loses the lease nor blocks its renewal; the work then asks
    `may_write` before each write and never acts on a lease whose renew deadline has passed."""

    kube: kc.Kube
    namespace: str
    name: str
    me: str
    lease_seconds: float = LEASE_SECONDS
    renew_deadline: float = LEASE_SECONDS * 2 / 3
    retry: float = LEASE_SECONDS / 6
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time
    observed: tuple[Any, ...] | None = None
    observed_at: float = 0.0
    valid_until: float = float("-inf")
    renewed_at: float = float("-inf")
    tried_at: float = float("-inf")
    renewer: threading.Thread | None = field(default=None, repr=False)
    stopping: threading.Event = field(default_factory=threading.Event, repr=False)

    def __post_init__(self) -> None:
        if not 0 < self.retry < self.renew_deadline < self.lease_seconds:
            raise ValueError("leader election needs 0 < retry < renew deadline < lease duration")

    def start(self) -> None:
        """Acquire or renew every `retry` seconds in a daemon thread until `stop`; the first attempt is made here,
        so a first round can lead at once."""
        if self.renewer is not None:
            return
        self.stopping.clear()
        self._renew_once()
        self.renewer = threading.Thread(target=self._renew_loop, name=f"lease-{self.name}", daemon=True)
        self.renewer.start()

    def stop(self) -> None:
        self.stopping.set()
        if self.renewer is not None:
            self.renewer.join(self.lease_seconds)
            self.renewer = None

    def _renew_loop(self) -> None:
        while not self.stopping.wait(max(0.0, self.retry - (self.clock() - self.tried_at))):
            self._renew_once()

    def _renew_once(self) -> None:
        self.tried_at = self.clock()
        try:
            self._attempt()
        except kc.ApiError as error:
            if error.status == 409:
                self.valid_until = float("-inf")  # someone else wrote the lease since we read it
            kc.log(f"lease {self.name}: {error}")
        except Exception as error:  # a lease we cannot read is not a reason to stop renewing
            self.valid_until = float("-inf")
            kc.log(f"lease {self.name}: {type(error).__name__}: {error}")

    @property
    def path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{kc.segment(self.namespace)}/leases"

    def may_write(self) -> bool:
        return self.clock() < self.valid_until

    def ensure(self) -> bool:
        """Acquire or renew when due (one attempt per `retry` seconds, leading or not); whether this replica may
        write now. While the renewing thread runs, only that thread talks to the API server."""
        if self.renewer is None and self.clock() - self.tried_at >= self.retry:
            self._renew_once()
        return self.may_write()

    def _attempt(self) -> None:
        start = self.clock()
        try:
            lease = self.kube.get(f"{self.path}/{kc.segment(self.name)}", tries=1)
        except kc.ApiError as error:
            if error.status != 404:
                raise
            lease = None
        if lease is None:
            self._write("POST", self.path, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                            "metadata": {"name": self.name, "namespace": self.namespace},
                                            "spec": self._spec({}, True)}, start)
            return
        if not isinstance(lease, dict):
            raise kc.ApiError(0, "the lease is not an object")
        spec = _dict(lease.get("spec"))
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseDurationSeconds"),
                  _dict(lease.get("metadata")).get("resourceVersion"))
        if record != self.observed:
            self.observed, self.observed_at = record, self.clock()
        holder = spec.get("holderIdentity")
        duration = _duration(spec.get("leaseDurationSeconds"), self.lease_seconds)
        if holder and holder != self.me and self.clock() < self.observed_at + duration:
            self.valid_until = float("-inf")
            return
        lease["spec"] = self._spec(spec, holder != self.me)
        self._write("PUT", f"{self.path}/{kc.segment(self.name)}", lease, start)

    def _spec(self, spec: dict[str, Any], taking: bool) -> dict[str, Any]:
        now = micro_time(self.wall())
        transitions = int(spec.get("leaseTransitions") or 0) if isinstance(spec.get("leaseTransitions"), int) else 0
        return {**spec, "holderIdentity": self.me, "leaseDurationSeconds": int(self.lease_seconds + 0.999),
                "renewTime": now, **({"acquireTime": now, "leaseTransitions": transitions + 1} if taking else {})}

    def _write(self, method: str, path: str, lease: dict[str, Any], start: float) -> None:
        written = self.kube.write(method, path, lease)
        spec = _dict(_dict(written).get("spec"))
        self.observed = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseDurationSeconds"),
                         _dict(_dict(written).get("metadata")).get("resourceVersion"))
        self.observed_at = self.clock()
        self.valid_until = start + self.renew_deadline
        self.renewed_at = start


def _duration(value: Any, default: float) -> float:
    """The holder's leaseDurationSeconds, honoured within 1 s .. 10 minutes."""
    return float(min(max(value, 1), 600)) if isinstance(value, int) and not isinstance(value, bool) else default


# Per scale set: isolation and backoff.

@dataclass
class SetState:
    failures: int = 0
    not_before: float = float("-inf")


@dataclass
class Settings:
    prefix_length: int = PREFIX_LENGTH
    sync_seconds: float = SYNC_SECONDS
    max_pages: int = MAX_PAGES
    backoff_base: float = SYNC_SECONDS
    backoff_cap: float = 600.0
    retry_after_cap: float = kc.RETRY_AFTER_CAP
    page_limit: int = 500
    watch_seconds: int = 1
    """How long each round's watch stays open (its timeoutSeconds): the events since the last round arrive at once."""

    @classmethod
    def from_env(cls) -> Settings:
        """Intervals from the environment (tests run rounds in fractions of a second)."""
        sync = float(os.environ.get("PREFIX_IPAM_SYNC_SECONDS", SYNC_SECONDS))
        return cls(prefix_length=int(os.environ.get("PREFIX_IPAM_PREFIX_LENGTH", PREFIX_LENGTH)), sync_seconds=sync,
                   backoff_base=sync, backoff_cap=float(os.environ.get("PREFIX_IPAM_BACKOFF_CAP", 600.0)))


@dataclass
class RoundReport:
    led: bool = False
    sets_read: int = 0
    sets_failed: list[str] = field(default_factory=list)
    sets_waiting: int = 0
    patched: int = 0
    conflicts: int = 0
    rejected: int = 0
    shared: int = 0
    """Blocks listed on two NICs at once (an alert: given to neither)."""
    held_elsewhere: int = 0
    """Addresses not added yet because another CiliumNode's pool still holds them."""
    refused: int = 0


class Arm:
    """ARM reads with the controller's managed identity; the token is cached until shortly before it expires."""

    def __init__(self, client_id: str, http: kc.Http, settings: Settings) -> None:
        self.client_id, self.http, self.settings = client_id, http, settings
        self.tokens = kc.IdentityToken(http, lambda: IMDS_TOKEN, ARM_RESOURCE, client_id)

    def list_nics(self, sub: str, rg: str, scale_set: str) -> Iterator[dict[str, Any]]:
        """The NICs of one scale set, page by page; ApiError on a failed, looping or endless listing."""
        sub, rg, scale_set = kc.segment(sub), kc.segment(rg), kc.segment(scale_set)
        url: str | None = (f"{ARM}/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/"
                           f"virtualMachineScaleSets/{scale_set}/networkInterfaces?api-version={ARM_API_VERSION}")
        origin = urllib.parse.urlsplit(ARM)[:2]
        seen: set[str] = set()
        while url:
            if urllib.parse.urlsplit(url)[:2] != origin:
                raise kc.ApiError(0, f"nextLink leaves {ARM}: {url[:120]}")  # the bearer token stays with ARM
            if url in seen:
                raise kc.ApiError(0, "nextLink points back to a page already read")
            if len(seen) >= self.settings.max_pages:
                raise kc.ApiError(0, f"more than {self.settings.max_pages} pages of NICs")
            seen.add(url)
            request = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.tokens.get()}"})
            page = self.http.send(request)
            if not isinstance(page, dict) or not isinstance(page.get("value", []), list):
                raise kc.ApiError(0, "a NIC page is not an ARM list")
            yield from (nic for nic in page.get("value") or [] if isinstance(nic, dict))
            next_link = page.get("nextLink")
            url = next_link if isinstance(next_link, str) and next_link else None


class Mirror:
    """A collection kept in memory as a compact map by name: listed once in pages, then followed by watches from the
    list's resourceVersion, as client-go's reflector keeps an informer's cache (tools/cache reflector.go,
    ListAndWatch). A round then costs one short watch per collection whatever the cluster's size, and carries only
    what changed. An expired version (410 Gone) lists again; any other failure leaves the map as it was and the
    version at the last event applied, so the next round resumes from there."""

    def __init__(self, kube: kc.Kube, path: str, project: Callable[[dict[str, Any]], Any | None], page_limit: int,
                 watch_seconds: int) -> None:
        self.kube, self.path, self.project = kube, path, project
        self.page_limit, self.watch_seconds = page_limit, watch_seconds
        self.items: dict[str, Any] = {}
        self.version: str | None = None

    def sync(self) -> dict[str, Any]:
        if self.version is not None:
            try:
                for event in self.kube.watch(self.path, self.version, self.watch_seconds):
                    self._apply(event)
                return self.items
            except kc.ApiError as error:
                if error.status != 410:
                    raise
                kc.log(f"prefix-ipam: {self.path}: {error}; listing again")
        self._relist()
        return self.items

    def _put(self, items: dict[str, Any], obj: dict[str, Any]) -> None:
        name = _dict(obj.get("metadata")).get("name")
        if not isinstance(name, str) or not _NODE_NAME.match(name):
            return
        kept = self.project(obj)
        if kept is None:
            items.pop(name, None)
        else:
            items[sys.intern(name)] = kept

    def _relist(self) -> None:
        items: dict[str, Any] = {}
        version = None
        for page in self.kube.list_pages(self.path, limit=self.page_limit):
            if version is None:
                version = _dict(page.get("metadata")).get("resourceVersion")
            for item in page["items"]:
                if isinstance(item, dict):
                    self._put(items, item)
        self.items = items
        self.version = version if isinstance(version, str) and version else None

    def _apply(self, event: dict[str, Any]) -> None:
        obj = event["object"]
        kind = event.get("type")
        if kind in ("ADDED", "MODIFIED"):
            self._put(self.items, obj)
        elif kind == "DELETED":
            name = _dict(obj.get("metadata")).get("name")
            if isinstance(name, str):
                self.items.pop(name, None)
        version = _dict(obj.get("metadata")).get("resourceVersion")
        if isinstance(version, str) and version:
            self.version = version


def node_place(node: dict[str, Any]) -> Where | None:
    """What the controller keeps of a Node: where its VM is (interned parts)."""
    where = instance_of_node(node)
    return None if where is None else tuple(sys.intern(p) for p in where)  # type: ignore[return-value]


def cilium_state(cilium_node: dict[str, Any]) -> dict[str, Any]:
    """What the controller keeps of a CiliumNode: the pool and used addresses (interned) and the resourceVersion
    its patches carry; `pool_patch` reads it as it reads the object."""
    ipam = _dict(_dict(cilium_node.get("spec")).get("ipam"))
    used = _dict(_dict(_dict(cilium_node.get("status")).get("ipam")).get("used"))
    return {"metadata": {"resourceVersion": _dict(cilium_node.get("metadata")).get("resourceVersion")},
            "spec": {"ipam": {"pool": dict.fromkeys(sys.intern(str(ip)) for ip in _dict(ipam.get("pool")))}},
            "status": {"ipam": {"used": dict.fromkeys(sys.intern(str(ip)) for ip in used)}}}


class Controller:
    def __init__(self, kube: kc.Kube, arm: Arm, leader: Leader, settings: Settings,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.kube, self.arm, self.leader, self.settings, self.clock = kube, arm, leader, settings, clock
        self.sets: dict[tuple[str, str, str], SetState] = {}
        self.nodes = Mirror(kube, "/api/v1/nodes", node_place, settings.page_limit, settings.watch_seconds)
        self.cilium = Mirror(kube, "/apis/cilium.io/v2/ciliumnodes", cilium_state, settings.page_limit,
                             settings.watch_seconds)

    def round(self) -> RoundReport:
        report = RoundReport()
        if not self.leader.ensure():
            return report
        report.led = True
        members: dict[str, Where] = self.nodes.sync()
        reads: dict[tuple[str, str, str], dict[Instance, list[IPv4Network]]] = {}
        unread: set[Instance] = set()
        for key in sorted({w[:3] for w in members.values()}):
            if not self.leader.ensure():
                return report
            found = self._read_set(key, report, unread)
            if found is not None:
                reads[key] = found
        decision = round_patches(members, reads, self.cilium.sync(), unread)
        if decision.shared:
            report.shared = len(decision.shared)
            kc.log(f"prefix-ipam: ALERT: {len(decision.shared)} block(s) listed on more than one NIC, given to no "
                   f"pool: {', '.join(str(b) for b in sorted(decision.shared)[:5])}")
        if decision.held:
            report.held_elsewhere = len(decision.held)
            kc.log(f"prefix-ipam: {len(decision.held)} address(es) still in another CiliumNode's pool, added in a "
                   "later round: " + ", ".join(f"{ip} ({decision.held[ip]})" for ip in sorted(decision.held)[:5]))
        for name, patch in decision.patches:
            if not self.leader.ensure():
                return report  # lost the lease or past its renew deadline: no write after that
            try:
                self.kube.write("PATCH", f"/apis/cilium.io/v2/ciliumnodes/{kc.segment(str(name))}", patch,
                                "application/merge-patch+json")
                report.patched += 1
            except kc.ApiError as error:
                # 409/422: edited since we read it (an endpoint took an address, say): read again next round.
                report.conflicts += error.status in (409, 422)
                kc.log(f"prefix-ipam: CiliumNode {name}: {error}")
        return report

    def _read_set(self, key: tuple[str, str, str], report: RoundReport,
                  unread: set[Instance]) -> dict[Instance, list[IPv4Network]] | None:
        """One scale set's blocks, or None when it is backing off or its read failed (never a partial result)."""
        state = self.sets.setdefault(key, SetState())
        if self.clock() < state.not_before:
            report.sets_waiting += 1
            return None
        rejected: list[str] = []
        refused: list[str] = []
        try:
            found = blocks_by_instance(self.arm.list_nics(*key), self.settings.prefix_length, rejected, refused, unread)
        except kc.ApiError as error:
            state.failures += 1
            wait = (min(error.retry_after, self.settings.retry_after_cap) if error.retry_after is not None
                    else kc.backoff_seconds(state.failures, self.settings.backoff_base, self.settings.backoff_cap))
            state.not_before = self.clock() + wait
            report.sets_failed.append(key[2])
            kc.log(f"prefix-ipam: scale set {key[2]}: {error}; next read in {wait:.0f} s")
            return None
        if rejected:
            report.rejected += len(rejected)
            kc.log(f"prefix-ipam: scale set {key[2]}: skipped {len(rejected)} IP configuration(s) that are neither "
                   f"/{self.settings.prefix_length} blocks nor single addresses: {', '.join(rejected[:5])}")
        if refused:
            report.refused += len(refused)
            kc.log(f"prefix-ipam: scale set {key[2]}: REFUSED {len(refused)} node(s), left unchanged: a declared "
                   f"/{self.settings.prefix_length} block came back without privateIPAddressPrefixLength (read at "
                   f"Network api-version {ARM_API_VERSION}); never taken as a /32: {', '.join(refused[:5])}")
        state.failures, state.not_before = 0, float("-inf")
        report.sets_read += 1
        return found


def controller_from_env(namespace: str, lease_name: str, client_id: str) -> Controller:
    settings = Settings.from_env()
    lease = float(os.environ.get("PREFIX_IPAM_LEASE_SECONDS", LEASE_SECONDS))
    kube = kc.Kube(timeout=lease / 3, budget=kc.Budget(float(os.environ.get("PREFIX_IPAM_KUBE_PER_MINUTE", 1200))))
    arm_http = kc.Http(timeout=lease / 3, budget=kc.Budget(float(os.environ.get("PREFIX_IPAM_ARM_PER_MINUTE", 240))))
    me = os.environ.get("POD_NAME") or os.uname().nodename
    # The lease has a client of its own: its renewals never wait for a token the work's requests have taken.
    lease_kube = kc.Kube(timeout=lease / 3, budget=kc.Budget(60))
    leader = Leader(lease_kube, namespace, lease_name, me, lease, lease * 2 / 3, lease / 6)
    return Controller(kube, Arm(client_id, arm_http, settings), leader, settings)


def run(controller: Controller, rounds: int | None = None, stop: Callable[[], bool] = lambda: False) -> int:
    """Rounds every `sync_seconds` while the lease is renewed (or watched) in its own thread; `rounds` and `stop` end
    it (tests). Nothing a server answers ends it: a round that fails, whatever it raised, is logged and the next one
    starts after a backoff that grows with each failed round in a row (from `sync_seconds` to `backoff_cap`)."""
    settings = controller.settings
    controller.leader.start()
    done, failures = 0, 0
    try:
        while (rounds is None or done < rounds) and not stop():
            started = controller.clock()
            try:
                controller.round()
                failures = 0
            except Exception as error:  # server data must end a round, never the daemon
                failures += 1
                kc.log(f"prefix-ipam: round stopped: {type(error).__name__}: {str(error)[:300]}")
            done += 1
            wait = settings.sync_seconds if not failures else \
                max(settings.sync_seconds, kc.backoff_seconds(failures, settings.sync_seconds, settings.backoff_cap))
            while controller.clock() - started < wait and not stop():
                time.sleep(min(controller.leader.retry, wait) / 2)
    finally:
        controller.leader.stop()
    return 0


if __name__ == "__main__":
    sys.exit(run(controller_from_env(sys.argv[1], sys.argv[2], os.environ["AZURE_CLIENT_ID"])))
