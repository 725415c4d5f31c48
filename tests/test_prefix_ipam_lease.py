"""The prefix IPAM controller's leader lock (agents/prefix_ipam.py `Leader`): two replicas run
concurrently against one fake API server (tests/support/fake_kube.py) whose Lease has resourceVersion semantics.

Rules from kubernetes/client-go v0.36 `tools/leaderelection/leaderelection.go`: `observedTime` is the LOCAL time the
record was last seen to change; `tryAcquireOrRenew` takes another holder's lease only once `observedTime +
LeaseDuration` has passed, never by the holder's `renewTime`; the holder gives up leading when it cannot renew
within `RenewDeadline` (< LeaseDuration); updates carry the resourceVersion read (409 on a lost race). Asserted from
the server's side: every CiliumNode write came from the replica holding the Lease at that moment.

The replicas' clocks are one `VirtualClock` the test moves a retry period at a time, and only once every replica has
made its lease attempt (and, unless a round is meant to outlast the lease, its round) at the current time: what the
lock decides depends on the lease's arithmetic, not on how fast a loaded machine answers.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gpucluster.agents import prefix_ipam as ipam
from tests.support.fake_kube import HANG, FakeAzure, FakeKube, Fault
from tests.support.ipam_world import CILIUM, LEASE_PATH, controller, populate, servers

__all__ = ["servers"]

LEASE = 1.0
STEP = LEASE / 6
"""The replicas' retry period: the clock moves one at a time."""
EPSILON = 1e-6
PATIENCE = 120.0
"""Real seconds a replica may take to act on one step of the clock before the test gives up on it."""


class VirtualClock:
    """Monotonic seconds that pass only when the test advances them; `sleep` waits for them to pass."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.moved = threading.Condition()
        self.stopped = False

    def __call__(self) -> float:
        with self.moved:
            return self.now

    def advance(self, seconds: float) -> None:
        with self.moved:
            self.now += seconds
            self.moved.notify_all()

    def sleep(self, seconds: float) -> None:
        with self.moved:
            until = self.now + seconds
            while self.now < until - EPSILON and not self.stopped:
                self.moved.wait()

    def stop(self) -> None:
        with self.moved:
            self.stopped = True
            self.moved.notify_all()


@dataclass
class Replica:
    controller: ipam.Controller
    stop: threading.Event = field(default_factory=threading.Event)
    renewed: float = -math.inf
    """When (on the virtual clock) its last finished lease attempt started."""
    rounded: float = -math.inf
    """When its last finished round started."""
    thread: threading.Thread | None = None

    @property
    def me(self) -> str:
        return self.controller.leader.me


def _watched(ctl: ipam.Controller, clock: VirtualClock) -> Replica:
    replica = Replica(ctl)
    attempt, work = ctl.leader._renew_once, ctl.round

    def renew_once() -> None:
        started = clock()
        attempt()
        replica.renewed = started

    def round_() -> ipam.RoundReport:
        started = clock()
        try:
            return work()
        finally:
            replica.rounded = started

    ctl.leader._renew_once = renew_once  # type: ignore[method-assign]
    ctl.round = round_  # type: ignore[method-assign]
    replica.thread = threading.Thread(target=ipam.run, args=(ctl,), kwargs={"stop": replica.stop.is_set}, daemon=True)
    return replica


def _until(done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while not done():
        assert time.monotonic() < deadline, f"{what}: not within {PATIENCE:g} s"
        time.sleep(0.002)


def _drift(kube: FakeKube, names: list[str], n: int) -> None:
    """Someone removes an address, so the leader has something to write."""
    current = kube.get_object(CILIUM, names[n % len(names)])
    if current is not None and current["spec"]["ipam"]["pool"]:
        current["spec"]["ipam"]["pool"].pop(sorted(current["spec"]["ipam"]["pool"])[0])
        kube.put_object(CILIUM, current)


def _replicas(kube: FakeKube, clock: VirtualClock, controllers: list[ipam.Controller], seconds: float,
              names: list[str], during: Callable[[float], None] = lambda elapsed: None,
              stops: dict[str, float] | None = None, stalled: Callable[[], set[str]] = set,
              rounds: bool = True, until: Callable[[], bool] = lambda: False) -> float:
    """Runs the replicas (the first takes the lease before the others start) for `seconds` of the virtual clock, or
    until `until()`; a replica named in `stops` is stopped at that time. After each step the test waits for every
    running replica's lease attempt at the new time (not for those `stalled()` names) and, with `rounds`, for its
    round. Returns the virtual seconds run."""
    replicas = [_watched(c, clock) for c in controllers]
    start, ends = clock(), stops or {}
    first, *others = replicas
    assert first.thread is not None
    first.thread.start()
    _until(lambda: kube.holder() == first.me, f"{first.me} taking the free lease")
    for replica in others:
        assert replica.thread is not None
        replica.thread.start()
        _until(lambda r=replica: r.renewed >= start, f"{replica.me} reading the lease")
    running = list(replicas)
    try:
        while clock() - start < seconds - EPSILON and not until():
            elapsed = clock() - start
            for replica in [r for r in running if ends.get(r.me, math.inf) <= elapsed + EPSILON]:
                replica.stop.set()
                assert replica.thread is not None
                replica.thread.join(PATIENCE)
                running.remove(replica)
            during(elapsed)
            _drift(kube, names, round(elapsed / STEP))
            clock.advance(STEP)
            now = clock()
            _until(lambda now=now: all((r.me in stalled() or r.renewed >= now) and (not rounds or r.rounded >= now)
                                       for r in running), f"the replicas acting at {now - start:.2f} s")
        return clock() - start
    finally:
        for replica in replicas:
            replica.stop.set()
        clock.stop()
        for replica in replicas:
            assert replica.thread is not None
            replica.thread.join(PATIENCE)


def _lease_controller(kube: FakeKube, tmp_path: Path, me: str, clock: VirtualClock, **kwargs: Any) -> ipam.Controller:
    # a failed round waits one sync period, never more than a step: each step has its round
    return controller(kube, tmp_path, me, lease=LEASE, clock=clock, backoff_cap=0.05, **kwargs)


def _one_writer(kube: FakeKube) -> None:
    assert kube.cilium_writes
    for _, writer, holder in kube.cilium_writes:
        assert writer == holder  # no write from a replica that did not hold the lease at that moment


def test_two_replicas_one_writer_and_no_flips(servers: tuple[FakeKube, FakeAzure], tmp_path: Path) -> None:
    kube, azure = servers
    clock = VirtualClock()
    kube.clock = clock
    desired = populate(kube, azure, {"cpu-z1-00": 4})
    a, b = (_lease_controller(kube, tmp_path, me, clock) for me in ("replica-a", "replica-b"))
    started = time.monotonic()
    ran = _replicas(kube, clock, [a, b], 2.5, list(desired))
    real = time.monotonic() - started
    assert ran >= 2 * LEASE  # long enough for the follower to take a lease that was not renewed
    assert [h for _, h in kube.lease_history] == ["replica-a"]
    _one_writer(kube)
    # Not spinning: the follower only reads the lease, once per retry period of either clock (its renewal loop
    # waits on real time, its decisions on its own clock).
    follower = [s for s in kube.seen if s.who == "replica-b"]
    assert follower and {s.path.rsplit("/", 2)[-2] for s in follower} == {"leases"}
    assert len(follower) <= (ran + real) / a.leader.retry + 3


@pytest.mark.parametrize("stall", ["503", "timeout"])
def test_a_stalled_leader_stops_writing_before_it_is_replaced(servers: tuple[FakeKube, FakeAzure], tmp_path: Path,
                                                              stall: str) -> None:
    """From 0.8 s to 2.6 s every lease request of replica-a fails, at once (503) or by its client's timeout (the
    server holds the answer): it stops writing at its renew deadline, and replica-b takes the lease a lease duration
    after it last saw it change."""
    kube, azure = servers
    clock = VirtualClock()
    kube.clock = clock
    desired = populate(kube, azure, {"cpu-z1-00": 4})
    a, b = (_lease_controller(kube, tmp_path, me, clock, timeout=2.0) for me in ("replica-a", "replica-b"))
    fault = Fault(503, times=10**6, who="replica-a") if stall == "503" else \
        Fault(delay=HANG, times=10**6, who="replica-a")
    cut = Fault(503, times=10**6, who="replica-a") if stall == "503" else Fault(delay=HANG, times=10**6, who="replica-a")

    def during(elapsed: float) -> None:
        if elapsed > 0.8 and fault not in [f for _, _, f in kube.faults]:
            kube.inject("GET", LEASE_PATH, fault)
            kube.inject("PUT", LEASE_PATH, cut)
        if elapsed > 2.6:
            fault.times = cut.times = 0

    _replicas(kube, clock, [a, b], 3.5, list(desired), during,
              stalled=lambda: {"replica-a"} if fault.times else set())
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
    clock = VirtualClock()
    kube.clock = clock
    desired = populate(kube, azure, {"cpu-z1-00": 4})
    a = _lease_controller(kube, tmp_path, "replica-a", clock, wall=lambda: time.time() + skew)
    b = _lease_controller(kube, tmp_path, "replica-b", clock)
    start = clock()
    _replicas(kube, clock, [a, b], 1.5 + 4 * LEASE, list(desired), stops={"replica-a": 1.5},
              until=lambda: len(kube.lease_history) > 1)
    history = kube.lease_history
    assert [h for _, h in history] == ["replica-a", "replica-b"]
    # replica-a renewed last at 1.5 s; replica-b saw that record then or one step later, and took the lease once it
    # had not changed for a lease duration
    handover = history[1][0] - (start + 1.5)
    assert LEASE - EPSILON <= handover <= LEASE + 2 * STEP + EPSILON
    _one_writer(kube)


def test_a_nic_listing_longer_than_the_lease_neither_loses_it_nor_livelocks(servers: tuple[FakeKube, FakeAzure],
                                                                              tmp_path: Path) -> None:
    """One scale set's NIC list takes 8 pages x 0.35 s = 2.8 s of the clock, longer than two 1 s leases. Renewing
    only between reads, each replica's lease lapsed during its own listing and the other took it: no patch ever.
    Renewed in its own thread, the lease stays with one replica, which patches. The pages wait on the virtual clock,
    which moves while the listing runs."""
    kube, azure = servers
    clock = VirtualClock()
    kube.clock, azure.clock, azure.sleep = clock, clock, clock.sleep
    azure.page_size = 1
    desired = populate(kube, azure, {"cpu-z1-00": 8})
    azure.inject("GET", "cpu-z1-00/networkInterfaces", Fault(delay=0.35, times=10**6))
    a, b = (_lease_controller(kube, tmp_path, me, clock) for me in ("replica-a", "replica-b"))
    start = clock()
    _replicas(kube, clock, [a, b], 30.0, list(desired), rounds=False, until=lambda: len(kube.cilium_writes) >= 8)
    assert len(kube.cilium_writes) >= 8  # every node's pool filled
    assert kube.cilium_writes[0][0] - start >= 8 * 0.35  # after the whole listing: longer than two leases
    assert [h for _, h in kube.lease_history] == ["replica-a"]  # no takeover while it works
    _one_writer(kube)
