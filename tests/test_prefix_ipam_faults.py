"""The prefix IPAM controller (agents/prefix_ipam.py) driven against fake Kubernetes and Azure
servers on 127.0.0.1 (tests/support/fake_kube.py) that inject faults: throttling with Retry-After, 5xx, slow answers, bodies
cut short, not JSON or nested absurdly deep, nextLink loops, 409/422 conflicts. The leader lock is driven in
tests/test_prefix_ipam_lease.py, the prod-size memory bound in tests/test_prefix_ipam_scale.py.

Consumer rules encoded: Retry-After is delay-seconds or an HTTP-date (RFC 9110 section 10.2.3); ARM answers
throttling with 429 and Retry-After (learn.microsoft.com azure-resource-manager/management/request-limits-and-throttling);
ARM list paging with `value` and `nextLink` (azure-rest-api-specs network `examples/VmssNetworkInterfaceList.json`);
CiliumNode `spec.ipam.pool` / `status.ipam.used` (cilium v1.20.3 `pkg/k8s/apis/cilium.io/v2/types.go`, `ipamTypes`);
a merge patch carrying a stale `metadata.resourceVersion` is refused with 409 (kubernetes.io/docs/reference/
using-api/api-concepts/#resource-versions, optimistic concurrency).
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from collections.abc import Callable
from email.utils import formatdate
from pathlib import Path

import pytest

from gpucluster.agents import kube_client as kc
from gpucluster.agents import prefix_ipam as ipam
from gpucluster.planning.agents_image import CONTEXT, DOCKERFILE, SCRIPTS
from tests.support.fake_kube import HANG, FakeAzure, FakeKube, Fault, deep_json
from tests.support.ipam_world import (
    CILIUM,
    NODES,
    RG,
    SUB,
    as_the_controller,
    block,
    controller,
    nic_reads,
    pool,
    populate,
    provider_id,
    servers,
)

__all__ = ["servers"]

FROZEN = 1000.0
"""The controller's clock where a test reads its backoff: it does not move while the rounds run."""
TIMEOUT = 2.0
"""The request timeout where a server holds its answer (HANG): far above a healthy answer on a loaded machine."""

# Isolation, backoff and Retry-After.

FAULTS: dict[str, Callable[[], Fault]] = {  # made when the test runs: an HTTP-date is relative to now
    "429 Retry-After seconds": lambda: Fault(429, {"Retry-After": "120"}),
    "429 Retry-After HTTP-date": lambda: Fault(429, {"Retry-After": formatdate(time.time() + 90, usegmt=True)}),
    "500": lambda: Fault(500),
    "503": lambda: Fault(503),
    "timeout": lambda: Fault(delay=HANG),
    "truncated body": lambda: Fault(truncate=True),
    "not JSON": lambda: Fault(200, body=b"<html>gateway</html>"),
    "deep JSON": lambda: Fault(200, body=deep_json(5000)),
}


@pytest.mark.parametrize("name", list(FAULTS))
def test_one_failing_scale_set_is_skipped_alone_and_backs_off(servers: tuple[FakeKube, FakeAzure], tmp_path: Path,
                                                                name: str) -> None:
    kube, azure = servers
    populate(kube, azure, {"h100-z1-00": 3, "h100-z1-01": 3, "h100-z1-02": 3})
    # A stale address on a node of the failing set: not on its NIC, not in use, but its read failed.
    stale = kube.get_object(CILIUM, "h100-z1-01000000")
    assert stale is not None
    stale["spec"]["ipam"]["pool"] = {"10.99.0.1": {}}
    kube.put_object(CILIUM, stale)
    azure.inject("GET", r"/virtualMachineScaleSets/h100-z1-01/networkInterfaces", FAULTS[name]())
    ctl = controller(kube, tmp_path, timeout=TIMEOUT, clock=lambda: FROZEN)
    report = ctl.round()
    assert report.led and report.sets_failed == ["h100-z1-01"] and report.sets_read == 2
    assert report.patched == 6  # the other scale sets' nodes got their blocks
    assert pool(kube, "h100-z1-01000000") == {"10.99.0.1"}  # nothing removed on a failed read
    state = ctl.sets[(SUB, RG, "h100-z1-01")]
    wait = state.not_before - FROZEN
    if name.startswith("429"):
        assert 80 < wait <= 120  # the server's Retry-After, not our own backoff
    else:
        assert 2.5 <= wait <= 5.0  # backoff with jitter: half of the base step at least
    for _ in range(3):  # still within the backoff
        ctl.round()
    assert nic_reads(azure, "h100-z1-01") == 1 and nic_reads(azure, "h100-z1-00") == 4
    assert ctl.round().sets_waiting == 1


def test_retry_after_is_read_in_both_forms_and_capped() -> None:
    """RFC 9110 section 10.2.3: `Retry-After = HTTP-date / delay-seconds`."""
    now = time.time()
    assert kc.retry_after_seconds("7", now) == 7
    assert kc.retry_after_seconds(formatdate(now + 42, usegmt=True), now) == pytest.approx(42, abs=1.5)
    assert kc.retry_after_seconds(formatdate(now - 42, usegmt=True), now) == 0
    assert kc.retry_after_seconds("100000", now) == kc.RETRY_AFTER_CAP
    assert kc.retry_after_seconds("soon", now) is None and kc.retry_after_seconds(None, now) is None


def test_kubernetes_retries_honour_retry_after(tmp_path: Path) -> None:
    kube = as_the_controller(FakeKube(), "t")
    waits: list[float] = []
    with kube.running():
        (tmp_path / "token").write_text("t")
        client = kc.Kube(kube.url, str(tmp_path), timeout=10.0, sleep=waits.append, retry_cap=30)
        kube.inject("GET", NODES, Fault(429, {"Retry-After": "3"}))
        kube.inject("GET", NODES, Fault(503))
        assert list(client.list_items(NODES)) == []
    assert waits[0] == 3 and 0.5 <= waits[1] <= 2  # the server's delay, then our own backoff


@pytest.mark.parametrize("loop", ["self", "ab", "endless"])
def test_next_link_loops_are_stopped_and_do_not_spin(servers: tuple[FakeKube, FakeAzure], tmp_path: Path,
                                                     loop: str) -> None:
    kube, azure = servers
    populate(kube, azure, {"cpu-z1-00": 2, "cpu-z1-01": 2})
    azure.loops["cpu-z1-01"] = loop
    now = [FROZEN]
    ctl = controller(kube, tmp_path, max_pages=5, backoff_base=0.3, clock=lambda: now[0])
    rounds = 20
    for _ in range(rounds):  # a second of the controller's clock, a round every sync period
        ctl.round()
        now[0] += ctl.settings.sync_seconds
    reads = nic_reads(azure, "cpu-z1-01")
    # At most MAX_PAGES requests per read, and reads spaced by the backoff (0.3 s, doubling): a handful, where the
    # loop without detection would be ~1,000 a minute (and the healthy set is read every round).
    assert reads <= 5 * 4 and nic_reads(azure, "cpu-z1-00") == rounds
    assert {r.query.get("$skiptoken") for r in azure.requests("GET", "cpu-z1-01")} != set()
    assert pool(kube, "cpu-z1-01000000") == set()  # nothing published from a listing that never ended


def test_a_next_link_to_another_host_gets_no_token(servers: tuple[FakeKube, FakeAzure], tmp_path: Path) -> None:
    kube, azure = servers
    populate(kube, azure, {"cpu-z1-00": 1})
    azure.inject("GET", "cpu-z1-00/networkInterfaces", Fault(200, body=b'{"value": [], "nextLink": '
                                                            b'"https://attacker.example/steal"}'))
    report = controller(kube, tmp_path).round()
    assert report.sets_failed == ["cpu-z1-00"] and nic_reads(azure, "cpu-z1-00") == 1


def test_a_block_larger_than_the_prefix_is_refused(servers: tuple[FakeKube, FakeAzure], tmp_path: Path) -> None:
    kube, azure = servers
    desired = populate(kube, azure, {"cpu-z1-00": 1})
    azure.nics["cpu-z1-00"][0][1].extend(["10.0.0.0/8", "fd00::/64", "10.77.0.0/27"])
    report = controller(kube, tmp_path).round()
    assert report.rejected == 3 and report.patched == 1
    assert pool(kube, "cpu-z1-00000000") == set(desired["cpu-z1-00000000"])  # 32 addresses, not 16 million


def test_provider_ids_that_would_change_the_url_are_not_used(servers: tuple[FakeKube, FakeAzure],
                                                             tmp_path: Path) -> None:
    kube, azure = servers
    for n, bad in enumerate(["../../providers/x", "a?b", "a%2Fb", "a#b", "a b"]):
        kube.put_object(NODES, {"metadata": {"name": f"bad-{n}"}, "spec": {"providerID": provider_id(bad, 0)}})
    kube.put_object(NODES, {"metadata": {"name": "ok"}, "spec": {"providerID": provider_id("cpu.z1_(00)", 0)}})
    controller(kube, tmp_path).round()
    paths = [r.path for r in azure.requests("GET", "networkInterfaces")]
    # Only the valid name was read, and it went out escaped (quote(safe="")): '(' and ')' as %28 and %29.
    assert paths == [f"/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Compute/virtualMachineScaleSets/"
                     "cpu.z1_%2800%29/networkInterfaces"]
    assert kc.segment("a/b?c") == "a%2Fb%3Fc"
    with pytest.raises(ValueError):
        kc.segment("..")


# Kubernetes faults: a round fails, the daemon goes on.

@pytest.mark.parametrize("fault", [Fault(500, times=3), Fault(429, {"Retry-After": "1"}, times=3),
                                   Fault(truncate=True, times=3), Fault(200, body=deep_json(100_000), times=3),
                                   Fault(200, body=b'{"items": "no"}', times=3), Fault(delay=HANG, times=3)],
                         ids=["500", "429", "truncated", "deep", "wrong shape", "timeout"])
def test_kubernetes_faults_end_a_round_not_the_daemon(servers: tuple[FakeKube, FakeAzure], tmp_path: Path,
                                                      fault: Fault) -> None:
    kube, azure = servers
    desired = populate(kube, azure, {"cpu-z1-00": 2})
    kube.inject("GET", NODES, fault)
    ctl = controller(kube, tmp_path, timeout=TIMEOUT)
    assert ipam.run(ctl, rounds=4) == 0  # the faults answer three requests: three rounds at most
    assert pool(kube, "cpu-z1-00000001") == set(desired["cpu-z1-00000001"])


def test_conflicts_are_read_again_next_round_and_an_address_in_use_is_never_dropped(
        servers: tuple[FakeKube, FakeAzure], tmp_path: Path) -> None:
    kube, azure = servers
    desired = populate(kube, azure, {"cpu-z1-00": 2}, filled=True)
    name = "cpu-z1-00000000"
    moved = desired[name][:16]  # the VM lost its second block (say, reimaged with one)
    azure.nics["cpu-z1-00"][0] = (0, [block(0)])
    in_use = desired[name][20]

    def endpoint_takes_an_address(method: str, path: str, fake: FakeKube) -> None:
        """Between the controller's read and its write, Cilium's agent hands `in_use` to a pod."""
        if method == "PATCH" and path.endswith(name) and fake.before_write is not None:
            fake.before_write = None
            current = fake.get_object(CILIUM, name)
            assert current is not None
            current["status"] = {"ipam": {"used": {in_use: {"owner": "default/pod-a"}}}}
            fake.put_object(CILIUM, current)

    kube.before_write = endpoint_takes_an_address
    ctl = controller(kube, tmp_path)
    first = ctl.round()
    assert first.conflicts == 1 and first.patched == 0
    assert in_use in pool(kube, name)
    kube.inject("PATCH", name, Fault(422))
    assert ctl.round().conflicts == 1
    assert ctl.round().patched == 1
    assert pool(kube, name) == {*moved, in_use}  # everything else gone, the address in use kept


def test_the_request_budget_paces_requests() -> None:
    """A Budget of 60 a minute lets 60 through at once, then one a second, whatever the caller does."""
    now = [0.0]
    budget = kc.Budget(60, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    for _ in range(180):
        budget.take()
    assert 119 <= now[0] <= 121


def test_the_scripts_run_side_by_side_as_the_image_ships_them(tmp_path: Path) -> None:
    """agents/Dockerfile copies SCRIPTS into one directory and runs `python3 <script>`: the shared client is
    imported from there, not from this repository."""
    copy_line = next(line for line in DOCKERFILE.read_text().splitlines() if line.startswith("COPY "))
    # Both ways: a script copied but not in SCRIPTS would change the image without changing its content tag.
    assert set(copy_line.split()[2:-1]) == set(SCRIPTS)
    for script in SCRIPTS:
        (tmp_path / script).write_text((CONTEXT / script).read_text())
    usage = subprocess.run([sys.executable, "-E", "-s", str(tmp_path / "health_agent.py")], capture_output=True,
                           text=True, cwd="/", timeout=30)
    assert usage.returncode == 2 and "usage: health_agent.py" in usage.stderr
    check = subprocess.run([sys.executable, "-E", "-s", "-c", "import prefix_ipam, health_agent, rollout, rollout_arm; "
                            "assert prefix_ipam.kc is health_agent.kc is rollout.kc is rollout_arm.kc; "
                            "assert rollout.drain.__file__.startswith(rollout.__file__.rsplit('/', 1)[0])"],
                           capture_output=True, text=True,
                           cwd=tmp_path, timeout=30)
    assert check.returncode == 0, check.stderr


# Server data the controller must survive: numbers str.isdigit() or json accept but int()/float() refuse.

def test_a_nic_whose_prefix_length_overflows_is_refused_not_a_crash(servers: tuple[FakeKube, FakeAzure],
                                                                     tmp_path: Path) -> None:
    """JSON reads 1e999 as float('inf'); int() of it raises OverflowError. One such NIC must not stop the round."""
    kube, azure = servers
    desired = populate(kube, azure, {"cpu-z1-00": 1, "cpu-z1-01": 1})
    vm = (f"/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Compute/virtualMachineScaleSets/cpu-z1-01/"
          "virtualMachines/0")
    configs = [json.dumps({"properties": {"privateIPAddress": "10.0.0.64", "privateIPAddressPrefixLength": length}})
               for length in ("1e999", "²")]
    configs.append('{"properties": {"privateIPAddress": "10.0.0.48", "privateIPAddressPrefixLength": 1e999}}')
    nic = json.dumps({"id": f"{vm}/networkInterfaces/nic0", "properties": {"virtualMachine": {"id": vm},
                                                                          "ipConfigurations": ["CONFIGS"]}})
    raw = '{"value": [' + nic.replace('"CONFIGS"', ", ".join(configs)) + "]}"  # 1e999 as a bare JSON number
    azure.inject("GET", "cpu-z1-01/networkInterfaces", Fault(200, body=raw.encode()))
    report = controller(kube, tmp_path).round()
    assert report.rejected == 3 and report.sets_read == 2
    assert pool(kube, "cpu-z1-00000000") == set(desired["cpu-z1-00000000"])


def test_an_arm_retry_after_in_superscript_digits_is_our_own_backoff(servers: tuple[FakeKube, FakeAzure],
                                                                     tmp_path: Path) -> None:
    kube, azure = servers
    populate(kube, azure, {"cpu-z1-00": 1, "cpu-z1-01": 1})
    azure.inject("GET", "cpu-z1-01/networkInterfaces", Fault(429, {"Retry-After": "²"}))
    ctl = controller(kube, tmp_path, backoff_base=5.0, clock=lambda: FROZEN)
    report = ctl.round()
    assert report.sets_failed == ["cpu-z1-01"] and report.patched == 1
    assert 2.5 <= ctl.sets[(SUB, RG, "cpu-z1-01")].not_before - FROZEN <= 5.0


def test_the_main_loop_survives_any_exception_and_backs_off(servers: tuple[FakeKube, FakeAzure], tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever a round raises (here a TypeError and an OverflowError, as from data no check foresaw), the daemon
    logs it and runs the next round, later each time in a row."""
    kube, azure = servers
    desired = populate(kube, azure, {"cpu-z1-00": 1})
    ctl = controller(kube, tmp_path, sync=0.02, backoff_cap=0.5)
    real, starts = ctl.round, []
    faults = [TypeError("unhashable"), OverflowError("int too large"), OverflowError("again")]

    def flaky() -> ipam.RoundReport:
        starts.append(time.monotonic())
        if faults:
            raise faults.pop(0)
        return real()

    monkeypatch.setattr(ctl, "round", flaky)
    assert ipam.run(ctl, rounds=5) == 0
    assert pool(kube, "cpu-z1-00000000") == set(desired["cpu-z1-00000000"])
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert gaps[2] >= 0.04  # the third failure in a row waits at least half of 4 x sync_seconds


# One address, one pool.

def _in_two_pools(kube: FakeKube, names: list[str]) -> set[str]:
    seen: set[str] = set()
    twice: set[str] = set()
    for name in names:
        for ip in pool(kube, name):
            (twice if ip in seen else seen).add(ip)
    return twice


def test_blocks_that_leave_a_nic_leave_its_pool_even_when_the_nic_has_none_left(
        servers: tuple[FakeKube, FakeAzure], tmp_path: Path) -> None:
    """VM 0 is being deleted: its NIC lists no block, and its two /28 already sit on VM 1's NIC. Its CiliumNode must
    let them go (no endpoint uses them), and VM 1's pool takes them only once they are gone: never 32 addresses in
    two pools at once."""
    kube, azure = servers
    desired = populate(kube, azure, {"cpu-z1-00": 2}, filled=True)
    names = sorted(desired)
    azure.nics["cpu-z1-00"] = [(0, []), (1, [block(0), block(1), block(2), block(3)])]
    ctl = controller(kube, tmp_path)
    first = ctl.round()
    assert pool(kube, names[0]) == set() and first.held_elsewhere == 32
    assert not _in_two_pools(kube, names)
    ctl.round()
    assert pool(kube, names[1]) == set(desired[names[0]]) | set(desired[names[1]])
    assert not _in_two_pools(kube, names)


def test_a_block_listed_on_two_nics_is_an_alert_and_in_no_pool(servers: tuple[FakeKube, FakeAzure], tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    kube, azure = servers
    desired = populate(kube, azure, {"cpu-z1-00": 2})
    names = sorted(desired)
    azure.nics["cpu-z1-00"][1] = (1, [block(2), block(3), block(0)])  # VM 0's first /28 on VM 1's NIC too
    report = controller(kube, tmp_path).round()
    assert report.shared == 1 and "ALERT: 1 block(s) listed on more than one NIC" in capsys.readouterr().err
    first = set(desired[names[0]][:16])
    assert not first & pool(kube, names[0]) and not first & pool(kube, names[1])
    assert pool(kube, names[1]) == set(desired[names[1]]) and pool(kube, names[0]) == set(desired[names[0]][16:])
