"""The prefix IPAM controller's world for its fault suites: a fleet of nodes, NICs and CiliumNodes on the fake
servers (tests/support/fake_kube.py), and controllers with short intervals pointed at them."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

import pytest

from gpucluster.agents import kube_client as kc
from gpucluster.agents import prefix_ipam as ipam
from gpucluster.kubernetes.objects import prefix_ipam as objects
from tests.support.fake_kube import FakeAzure, FakeKube
from tests.support.fake_rbac import service_account_user

SUB = "00000000-0000-0000-0000-000000000000"
RG = "gpucluster-prod"
NODES = "/api/v1/nodes"
CILIUM = "/apis/cilium.io/v2/ciliumnodes"
LEASE_PATH = r"/leases"


def provider_id(scale_set: str, instance: int) -> str:
    return (f"azure:///subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Compute/virtualMachineScaleSets/"
            f"{scale_set}/virtualMachines/{instance}")


def block(index: int) -> str:
    return f"{IPv4Address((10 << 24) + 16 * (index + 1))}/28"


def addresses(cidr: str) -> list[str]:
    first = int(IPv4Address(cidr.split("/")[0]))
    return [str(IPv4Address(first + i)) for i in range(16)]


def node_object(name: str, scale_set: str, instance: int) -> dict[str, Any]:
    """A node about the size a real one is (labels, conditions, a few images)."""
    return {"metadata": {"name": name, "labels": {f"example.io/label-{i}": "x" * 20 for i in range(10)}},
            "spec": {"providerID": provider_id(scale_set, instance)},
            "status": {"conditions": [{"type": t, "status": "False", "reason": "KubeletReady" * 2,
                                       "message": "kubelet is posting ready status" * 2} for t in "ABCDE"],
                       "images": [{"names": [f"registry.example/image-{i}@sha256:{'0' * 64}"], "sizeBytes": 1}
                                  for i in range(8)]}}


def populate(kube: FakeKube, azure: FakeAzure, sets: dict[str, int], filled: bool = False) -> dict[str, list[str]]:
    """Nodes, NICs (two /28 per VM) and CiliumNodes; returns each node's desired addresses."""
    desired: dict[str, list[str]] = {}
    index = 0
    for scale_set, count in sets.items():
        nics = azure.nics.setdefault(scale_set.lower(), [])
        for i in range(count):
            name = f"{scale_set}{i:06d}"
            blocks = [block(index), block(index + 1)]
            index += 2
            nics.append((i, blocks))
            desired[name] = [a for b in blocks for a in addresses(b)]
            kube.put_object(NODES, node_object(name, scale_set, i))
            pool = {a: {} for a in desired[name]} if filled else {}
            kube.put_object(CILIUM, {"metadata": {"name": name}, "spec": {"ipam": {"pool": pool}}})
    return desired


def pool(kube: FakeKube, name: str) -> set[str]:
    found = kube.get_object(CILIUM, name)
    assert found is not None
    return set(found["spec"]["ipam"].get("pool") or {})


ACCOUNT = service_account_user(objects.NAMESPACE, objects.APP)


def as_the_controller(kube: FakeKube, *tokens: str) -> FakeKube:
    """The fake API server authorizes `tokens` as the controller's service account, by the roles the plan renders
    for it (components/kubernetes/objects/prefix_ipam.py)."""
    rendered = objects.prefix_ipam_objects({"client_id": "client-id"}, "api.example", 6443, "agents:1")
    kube.enforce(rendered, {t: ACCOUNT for t in tokens})
    return kube


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeKube, FakeAzure]]:
    kube, azure = as_the_controller(FakeKube()), FakeAzure()
    with kube.running(), azure.running():
        monkeypatch.setattr(ipam, "ARM", azure.url)
        monkeypatch.setattr(ipam, "IMDS_TOKEN", f"{azure.url}/metadata/identity/oauth2/token")
        yield kube, azure
    assert not kube.denied, kube.denied  # a refused call the controller survived is still a missing grant


def controller(kube: FakeKube, tmp_path: Path, me: str = "replica-a", lease: float = 60.0, sync: float = 0.05,
               wall: Callable[[], float] = time.time, timeout: float = 10.0,
               clock: Callable[[], float] = time.monotonic, **settings: Any) -> ipam.Controller:
    """A controller whose lease and request timeout no loaded machine outlives, unless a test asks for shorter ones;
    `clock` is its own and its lease's."""
    account = tmp_path / me
    account.mkdir(exist_ok=True)
    (account / "token").write_text(me)
    if kube.rbac is not None:
        kube.users[me] = ACCOUNT
    client = kc.Kube(kube.url, str(account), timeout=timeout, budget=kc.Budget(100_000), retry_base=0.01,
                     retry_cap=0.05)
    arm = kc.Http(timeout=timeout, budget=kc.Budget(100_000), retry_base=0.01, retry_cap=0.05)
    config = ipam.Settings(sync_seconds=sync, backoff_base=settings.pop("backoff_base", 5.0), **settings)
    leader = ipam.Leader(client, "kube-system", "gpucluster-prefix-ipam", me, lease, lease * 2 / 3, lease / 6,
                         clock=clock, wall=wall)
    return ipam.Controller(client, ipam.Arm("client-id", arm, config), leader, config, clock=clock)


def nic_reads(azure: FakeAzure, scale_set: str) -> int:
    return len(azure.requests("GET", f"/virtualMachineScaleSets/{scale_set}/networkInterfaces$"))
