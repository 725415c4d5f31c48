"""The prefix IPAM controller's leader lock (agents/prefix_ipam.py `Leader`): two replicas run
concurrently against one fake API server (tests/support/fake_kube.py) whose Lease has resourceVersion semantics.

Rules from kubernetes/client-go v0.36 `tools/leaderelection/leaderelection.go`: `observedTime` is the LOCAL time the
record was last seen to change; `tryAcquireOrRenew` takes another holder's lease only once `observedTime +
LeaseDuration` has passed, never by the holder's `renewTime`; the holder gives up leading when it cannot renew
within `RenewDeadline` (< LeaseDuration); updates carry the resourceVersion read (409 on a lost race). Asserted from
the server's side: every CiliumNode write came from the replica holding the Lease at that moment.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gpucluster.agents import prefix_ipam as ipam
from tests.support.fake_kube import FakeAzure, FakeKube, Fault
from tests.support.ipam_world import CILIUM, LEASE_PATH, controller, populate, servers

__all__ = ["servers"]


def _drift(kube: FakeKube, names: list[str], stop: threading.Event) -> None:
    """Someone keeps removing an address, so the leader keeps writing."""
    n = 0
    while not stop.is_set():
        current = kube.get_object(CILIUM, names[n % len(names)])
        if current is not None and current["spec"]["ipam"]["pool"]:
            current["spec"]["ipam"]["pool"].pop(sorted(current["spec"]["ipam"]["pool"])[0])
            kube.put_object(CILIUM, current)
        n += 1
        time.sleep(0.03)


def _replicas(kube: FakeKube, replicas: list[ipam.Controller], seconds: float, names: list[str],
              during: Callable[[float], None] = lambda elapsed: None,
              stops: dict[str, float] | None = None) -> None:
    stop = threading.Event()
    start = time.monotonic()
    ends = {c.leader.me: start + (stops or {}).get(c.leader.me, seconds) for c in replicas}
    threads = [threading.Thread(target=ipam.run, args=(c,), kwargs={
        "stop": lambda c=c: stop.is_set() or time.monotonic() > ends[c.leader.me]}) for c in replicas]
    drift = threading.Thread(target=_drift, args=(kube, names, stop))
    for t in [*threads, drift]:
        t.start()
        time.sleep(0.05)
    while time.monotonic() - start < seconds:
        during(time.monotonic() - start)
        time.sleep(0.02)
    stop.set()
    for t in [*threads, drift]:
        t.join(5)


def _one_writer(kube: FakeKube) -> None:
    assert kube.cilium_writes
    for _, writer, holder in kube.cilium_writes:
        assert writer == holder  # no write from a replica that did not hold the lease at that moment


def test_two_replicas_one_writer_and_no_flips(servers: tuple[FakeKube, FakeAzure], tmp_path: Path) -> None:
    kube, azure = servers
    desired = populate(kube, azure, {"cpu-z1-00": 4})
    a, b = controller(kube, tmp_path, "replica-a"), controller(kube, tmp_path, "replica-b")
    _replicas(kube, [a, b], 2.5, list(desired))
    assert [h for _, h in kube.lease_history] == ["replica-a"]
    _one_writer(kube)
    # Not spinning: the follower only reads the lease, once per retry period.
    follower = [s for s in kube.seen if s.who == "replica-b"]
    assert follower and {s.path.rsplit("/", 2)[-2] for s in follower} == {"leases"}
    assert len(follower) <= 2.5 / a.leader.retry + 3


@pytest.mark.parametrize("stall", ["503", "timeout"])
def test_a_stalled_leader_stops_writing_before_it_is_replaced(servers: tuple[FakeKube, FakeAzure], tmp_path: Path,
                                                              stall: str) -> None:
    kube, azure = servers
    desired = populate(kube, azure, {"cpu-z1-00": 4})
    a, b = controller(kube, tmp_path, "replica-a", timeout=0.2), controller(kube, tmp_path, "replica-b", timeout=0.2)
    fault = Fault(503, times=10**6, who="replica-a") if stall == "503" else \
        Fault(delay=0.3, times=10**6, who="replica-a")
    cut = Fault(503, times=10**6, who="replica-a") if stall == "503" else Fault(delay=0.3, times=10**6, who="replica-a")

    def during(elapsed: float) -> None:
        if elapsed > 0.8 and fault not in [f for _, _, f in kube.faults]:
            kube.inject("GET", LEASE_PATH, fault)
            kube.inject("PUT", LEASE_PATH, cut)
        if elapsed > 2.6:
            fault.times = cut.times = 0

    _replicas(kube, [a, b], 3.5, list(desired), during)
    holders = [h for _, h in kube.lease_history]
    assert holders[:2] == ["replica-a", "replica-b"] and len(holders) <= 2  # one flip, and it stays
    _one_writer(kube)
    assert {w for _, w, _ in kube.cilium_writes} == {"replica-a", "replica-b"}


@pytest.mark.parametrize("skew", [-60.0, 60.0])
def test_clock_skew_neither_splits_nor_freezes_the_lock(servers: tuple[FakeKube, FakeAzure], tmp_path: Path,
                                                        skew: float) -> None:
    """The leader's clock is `skew` seconds off: its renewTime says nothing to the follower, which measures expiry
    from when IT saw the record change. With -60 s a reader trusting renewTime would take a live lease; with +60 s it
    would wait a minute after the leader died."""
    kube, azure = servers
    desired = populate(kube, azure, {"cpu-z1-00": 4})
    a = controller(kube, tmp_path, "replica-a", wall=lambda: time.time() + skew)
    b = controller(kube, tmp_path, "replica-b")
    _replicas(kube, [a, b], 3.0, list(desired), stops={"replica-a": 1.5})
    history = kube.lease_history
    assert [h for _, h in history] == ["replica-a", "replica-b"]
    handover = history[1][0] - (history[0][0] + 1.5)
    assert handover < 3 * a.leader.lease_seconds  # taken within about one lease duration of the leader's end
    _one_writer(kube)




def test_a_nic_listing_longer_than_the_lease_neither_loses_it_nor_livelocks(servers: tuple[FakeKube, FakeAzure],
                                                                              tmp_path: Path) -> None:
    """One scale set's NIC list takes 8 pages x 0.35 s = 2.8 s, longer than two 1 s leases. Renewing only between
    reads, each replica's lease lapsed during its own listing and the other took it: no patch ever. Renewed in its
    own thread, the lease stays with one replica, which patches. Each page is well inside the request timeout
    (3 s, not the 0.5 s a loaded machine's slow page could cross) and the replicas run 8 s, two listings and more:
    what is measured is the lease, not the machine's speed."""
    kube, azure = servers
    azure.page_size = 1
    desired = populate(kube, azure, {"cpu-z1-00": 8})
    azure.inject("GET", "cpu-z1-00/networkInterfaces", Fault(delay=0.35, times=10**6))
    a = controller(kube, tmp_path, "replica-a", timeout=3.0)
    b = controller(kube, tmp_path, "replica-b", timeout=3.0)
    _replicas(kube, [a, b], 8.0, list(desired))
    assert len(kube.cilium_writes) >= 8  # every node's pool filled at least once
    assert [h for _, h in kube.lease_history] == ["replica-a"]  # no takeover while it works
    _one_writer(kube)
