"""ScaleSetsReady against the fake ARM (tests/support/fake_arm.py): the one wait for every node scale set's allocation.

What it pins:
- a create that ARM accepted and whose allocation then failed is in the state (the scale set is in Azure), the wait
  fails with one line naming each failed scale set, its ARM error code and the fix;
- recovery through Pulumi's real dynamic-provider host, as `pulumi up --refresh` runs it: Read reports the live
  Failed, Diff asks for an update, Update PUTs the same model again (`If-Match: *`, the live capacity), and the wait
  then passes;
- the wait honours the operation's `Retry-After` (azure-core `_extract_delay`), and stops at its deadline naming
  what is still in progress.
"""

from __future__ import annotations

import copy
import datetime
import email.utils
from pathlib import Path
from typing import Any

import grpc
import pytest
from pulumi.dynamic.dynamic import serialize_provider
from pulumi.runtime import proto

from gpucluster.azure.scale_set.provider import ScaleSetProvider
from gpucluster.azure.scale_set.provider import resource_id as scale_set_id
from gpucluster.azure.scale_sets_ready_provider import ScaleSetsNotReadyError, ScaleSetsReadyProvider, retry_after
from gpucluster.offline.engine import ProgramRun
from tests.support.dynamic_host import dynamic_host, props, unprops
from tests.support.fake_arm import DEPLOYER, FakeArm, fake_arm

NAMES = ("h100-z1-00", "h100-z1-01", "h100-z2-00")
URN = "urn:pulumi:prod::gpucluster::{}::{}"


@pytest.fixture(scope="module")
def declared(prod_run: ProgramRun) -> dict[str, Any]:
    """Three of prod's scale sets and the wait, as the program declares them (no `__provider`)."""
    regs = {r.name: r for r in prod_run.registrations if r.custom}
    return {name: {k: v for k, v in copy.deepcopy(regs[name].inputs).items() if k != "__provider"}
            for name in (*NAMES, "prod-nodes-ready")}


def _connect(cls: type, arm: FakeArm, interval: float = 0) -> Any:
    return cls(endpoint=arm.base_url, credential=DEPLOYER, connection_verify=arm.ca_file, polling_interval=interval)


def _wait_inputs(declared: dict[str, Any], outs: dict[str, dict[str, Any]], **settings: Any) -> dict[str, Any]:
    """The wait's declared inputs for the scale sets in `outs` (name -> the scale set's outputs)."""
    wait = declared["prod-nodes-ready"]
    entries = [{**e, "id": scale_set_id(outs[e["name"]]), "operation": outs[e["name"]]["operation"]}
               for e in wait["scaleSets"] if e["name"] in outs]
    return {**wait, "scaleSets": entries, **settings}


def _rpc_error(call: Any) -> str:
    with pytest.raises(grpc.RpcError) as failed:
        call()
    return str(failed.value.details()).strip().splitlines()[-1]


def test_failed_allocations_are_named_in_one_line_and_the_next_up_with_refresh_retries_them(
        tmp_path: Path, declared: dict[str, Any]) -> None:
    with fake_arm(tmp_path) as arm, dynamic_host() as host:
        sets = serialize_provider(_connect(ScaleSetProvider, arm))
        wait = serialize_provider(_connect(ScaleSetsReadyProvider, arm))
        arm.failing_creates = ["AllocationFailed", "OverconstrainedAllocationRequest"]
        outs: dict[str, dict[str, Any]] = {}
        for name in NAMES:  # the first two fail after ARM accepted them
            created = host.Create(proto.CreateRequest(urn=URN.format("pulumi-python:dynamic:Resource", name),
                                                      properties=props({**declared[name], "__provider": sets})))
            outs[name] = unprops(created.properties)
            assert created.id == scale_set_id(outs[name])
            assert outs[name]["provisioningState"] == "Creating"  # in the state, as it is in Azure
        wait_props = props({**_wait_inputs(declared, outs), "__provider": wait})
        line = _rpc_error(lambda: host.Create(proto.CreateRequest(urn=URN.format("w", "prod-nodes-ready"),
                                                                  properties=wait_props)))
        assert line.startswith("gpucluster.azure.scale_sets_ready_provider.ScaleSetsNotReadyError: 2 of 3 node "
                               "scale sets did not come up: h100-z1-00 ended Failed with AllocationFailed (Azure has "
                               "no capacity for Standard_ND96isr_H100_v5 in zone 1 now")
        assert "h100-z1-01 ended Failed with OverconstrainedAllocationRequest (Azure cannot meet" in line
        assert line.count("`pulumi up --refresh` PUTs it again") == 2 and "h100-z2-00" not in line

        # `pulumi up --refresh`: Read shows the live Failed, Diff asks for an update, Update PUTs the model again
        failed = outs["h100-z1-00"]
        path = scale_set_id(failed)
        arm.set_capacity(path, 5)  # whatever Azure holds now is kept, as the autoscaler's would be
        read = unprops(host.Read(proto.ReadRequest(id=path, urn=URN.format("r", "h100-z1-00"),
                                                   properties=props({**failed, "__provider": sets}))).properties)
        assert read["provisioningState"] == "Failed"
        news = props({**declared["h100-z1-00"], "__provider": sets})
        diff = host.Diff(proto.DiffRequest(id=path, urn=URN.format("d", "h100-z1-00"), olds=props(read),
                                           news=news))
        assert diff.changes == proto.DiffResponse.DIFF_SOME and not diff.replaces
        puts = len(arm.calls("PUT"))
        updated = unprops(host.Update(proto.UpdateRequest(id=path, urn=URN.format("u", "h100-z1-00"),
                                                          olds=props(read), news=news)).properties)
        [retry] = arm.calls("PUT")[puts:]
        assert retry.headers.get("if-match") == "*" and "if-none-match" not in retry.headers
        assert retry.body["sku"]["capacity"] == 5 and not arm.calls("PATCH")
        first_put = arm.calls("PUT")[0]
        assert {k: v for k, v in retry.body.items() if k != "sku"} == {k: v for k, v in first_put.body.items()
                                                                       if k != "sku"}
        outs["h100-z1-00"] = updated
        del outs["h100-z1-01"]  # left Failed: the wait, declared for the two others, passes
        host.Create(proto.CreateRequest(urn=URN.format("w", "prod-nodes-ready"),
                                        properties=props({**_wait_inputs(declared, outs), "__provider": wait})))
        stored = arm.stored(path)
        assert stored is not None and stored["properties"]["provisioningState"] == "Succeeded"


def test_the_wait_honours_retry_after_and_stops_at_its_deadline(tmp_path: Path, declared: dict[str, Any]) -> None:
    """The wait sleeps on a clock of its own, which the fake ARM's operations read too: no real wait."""
    with fake_arm(tmp_path) as arm:
        scale_sets, wait = _connect(ScaleSetProvider, arm), _connect(ScaleSetsReadyProvider, arm, interval=0.01)
        now = [0.0]
        slept: list[float] = []

        def sleep(seconds: float) -> None:
            slept.append(seconds)
            now[0] += seconds

        arm.clock = wait.clock = lambda: now[0]
        wait.sleep = sleep
        arm.operation_seconds, arm.retry_after = 1.2, 1
        created = scale_sets.create(copy.deepcopy(declared["h100-z1-00"]))
        wait.create(_wait_inputs(declared, {"h100-z1-00": created.outs}))
        # Retry-After: 1 between polls, not the 10 ms interval: InProgress at 0 s and 1 s, Succeeded at 2 s
        assert slept == [1, 1] and len(arm.polls()) == 3

        arm.operation_seconds, arm.retry_after = 30, None
        slow = scale_sets.update(created.id, created.outs, {**created.outs, "tags": {**created.outs["tags"], "x": "y"}})
        started, slept[:] = now[0], []
        with pytest.raises(ScaleSetsNotReadyError) as late:
            wait.create(_wait_inputs(declared, {"h100-z1-00": slow.outs}, deadlineSeconds=0.5))
        assert now[0] - started == pytest.approx(0.5) and max(slept) <= 0.01 + 1e-9  # polled every 10 ms until then
        assert str(late.value) == ("1 of 1 node scale sets did not come up: h100-z1-00 still Updating after 0.5 s (run "
                                   "`pulumi up` again to wait on: the operation goes on in Azure)")


def test_retry_after_is_read_as_azure_core_reads_it() -> None:
    """Delta-seconds, an HTTP date, or milliseconds (azure-core `get_retry_after`); nothing usable is None."""
    soon = email.utils.format_datetime(datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=30),
                                       usegmt=True)
    assert retry_after({"Retry-After": "15"}) == 15
    assert 25 < (retry_after({"Retry-After": soon}) or 0) <= 30
    assert retry_after({"retry-after-ms": "1500"}) == 1.5
    assert retry_after({"Retry-After": "soon"}) is None and retry_after({}) is None


def test_check_names_what_the_wait_cannot_use(declared: dict[str, Any]) -> None:
    wait = ScaleSetsReadyProvider()
    assert wait.check({}, declared["prod-nodes-ready"]).failures == []
    twice = {**declared["prod-nodes-ready"], "scaleSets": declared["prod-nodes-ready"]["scaleSets"][:1] * 2,
             "deadlineSeconds": 0}
    assert sorted((f.property, f.reason) for f in wait.check({}, twice).failures) == [
        ("deadlineSeconds", "deadlineSeconds must be a positive number"), ("scaleSets", "each scale set once")]


def test_what_needs_the_nodes_waits_for_the_allocations_not_for_the_creates(prod_run: ProgramRun) -> None:
    """The in-cluster layer (and so everything under it) depends on the one wait, which names every node scale set
    and reads each one's id and operation (so the engine orders it after every create); nothing depends on a node
    pool component, whose creates now end at ARM's answer."""
    regs = prod_run.registrations
    [wait] = [r for r in regs if r.custom and r.name == "prod-nodes-ready"]
    scale_sets = {r.urn: r.name for r in regs if r.custom and r.inputs.get("armType") ==
                  "Microsoft.Compute/virtualMachineScaleSets"}
    assert sorted(e["name"] for e in wait.inputs["scaleSets"]) == sorted(scale_sets.values())
    assert set(wait.dependencies) == set(scale_sets)
    [in_cluster] = [r for r in regs if r.type == "gpucluster:kubernetes:InCluster"]
    assert wait.urn in in_cluster.dependencies
    pools = {r.urn for r in regs if r.type == "gpucluster:azure:NodePool"}
    assert not [r.name for r in regs if pools & set(r.dependencies)]


@pytest.mark.parametrize("headers", [{"Retry-After": "nan"}, {"Retry-After": "inf"}, {"Retry-After": "-inf"},
                                     {"retry-after-ms": "NaN"}, {"x-ms-retry-after-ms": "Infinity"}])
def test_a_retry_after_that_is_not_a_finite_number_is_unreadable_not_a_crash(headers: dict[str, str]) -> None:
    """float() reads "nan" and "inf"; time.sleep(nan) raises ValueError: such a header reads as absent, and the wait
    falls back to its polling interval (#53 item 2, the crash)."""
    from gpucluster.azure.scale_sets_ready_provider import retry_after

    assert retry_after(headers) is None
    assert retry_after({"Retry-After": "-5"}) == 0.0 and retry_after({"retry-after-ms": "1500"}) == 1.5


def test_a_retry_after_past_the_deadline_is_cut_to_it_and_the_line_says_the_time_waited(
        tmp_path: Path, declared: dict[str, Any]) -> None:
    """`Retry-After: 36000` against a 7,200-second wait: it sleeps 7,200 s in all (an injected clock, no real wait),
    polls at its deadline, and says it waited 7200 s, which it did."""
    with fake_arm(tmp_path) as arm:
        scale_sets, wait = _connect(ScaleSetProvider, arm), _connect(ScaleSetsReadyProvider, arm, interval=30)
        arm.operation_seconds, arm.retry_after = 3600, 36000
        created = scale_sets.create(copy.deepcopy(declared["h100-z1-00"]))
        now = [0.0]
        slept: list[float] = []

        def sleep(seconds: float) -> None:
            slept.append(seconds)
            now[0] += seconds

        wait.clock, wait.sleep = (lambda: now[0]), sleep
        with pytest.raises(ScaleSetsNotReadyError) as late:
            wait.create(_wait_inputs(declared, {"h100-z1-00": created.outs}, deadlineSeconds=7200))
        assert slept == [7200] and now[0] == 7200
        assert "h100-z1-00 still Creating after 7200 s" in str(late.value)
