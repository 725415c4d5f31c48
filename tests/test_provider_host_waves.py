"""How long prod's scale-set creates take through Pulumi's real dynamic-provider host, before and after the creates
stopped holding a worker for the length of ARM's long-running operation.

The host (pulumi 3.272 `pulumi/dynamic/__main__.py`) serves RPCs from `ThreadPoolExecutor(max_workers=4)`, and the
engine sends every create at once (`pulumi up --parallel` is unbounded by default).
- Before (tests/support/held_worker.py, the create main had): each create held its worker until the operation ended, so 42
  creates ran in ceil(42 / 4) = 11 waves and a Check sent meanwhile queued behind them.
- Now: the create returns on ARM's answer to the PUT, and one ScaleSetsReady create waits for all 42 operations in
  one RPC (one worker), while a Check sent during the wait finds a free worker.
The fake ARM's operations take OPERATION_SECONDS (a stand-in for Azure's create of a scale set, T_create).
docs/performance.md has the figures and what they mean at Azure's durations.
"""

from __future__ import annotations

import copy
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pulumi.dynamic.dynamic import serialize_provider
from pulumi.runtime import proto

from gpucluster.azure.scale_set.provider import ScaleSetProvider
from gpucluster.azure.scale_sets_ready_provider import ScaleSetsReadyProvider
from gpucluster.offline.engine import ProgramRun
from tests.support.dynamic_host import dynamic_host, props, unprops
from tests.support.fake_arm import DEPLOYER, FakeArm, fake_arm
from tests.support.held_worker import HeldWorkerProvider

HOST_WORKERS = 4
"""pulumi/dynamic/__main__.py main(): grpc.server(futures.ThreadPoolExecutor(max_workers=4))."""
OPERATION_SECONDS = 0.4
POLL_SECONDS = 0.05
URN = "urn:pulumi:prod::gpucluster::pulumi-python:dynamic:Resource::"


def waves(scale_sets: int, workers: int = HOST_WORKERS) -> int:
    return math.ceil(scale_sets / workers)


@dataclass(frozen=True)
class Measured:
    creates: float
    """Seconds from the first create sent to the last one answered."""
    ready: float
    """Seconds from the first create sent until every scale set is known to have come up."""
    in_flight: int
    check_wait: float
    """How long a Check sent 1 operation length after the creates waited for a worker."""
    check_in_wait: float | None
    """How long a Check sent while ScaleSetsReady polled waited (None: no wait)."""


@pytest.fixture(scope="module")
def prod_sets(prod_run: ProgramRun) -> list[dict[str, Any]]:
    sets = [{k: v for k, v in copy.deepcopy(r.inputs).items() if k != "__provider"} for r in prod_run.registrations
            if r.custom and r.inputs.get("armType") == "Microsoft.Compute/virtualMachineScaleSets"]
    assert len(sets) == 43 and waves(len(sets)) == 11
    return sets


@pytest.fixture(scope="module")
def prod_wait(prod_run: ProgramRun) -> dict[str, Any]:
    reg = next(r for r in prod_run.registrations if r.custom and r.name == "prod-nodes-ready")
    return {k: v for k, v in copy.deepcopy(reg.inputs).items() if k != "__provider"}


def _check(host: Any, inputs: dict[str, Any], provider: str) -> float:
    asked = time.monotonic()
    host.Check(proto.CheckRequest(urn=f"{URN}late", olds=props({}), news=props({**inputs, "__provider": provider})))
    return time.monotonic() - asked


def _run(tmp_path: Path, provider_class: type, sets: list[dict[str, Any]], wait: dict[str, Any] | None) -> Measured:
    """42 creates at once through the host, a Check sent while the host is busiest, then (`wait`) the one wait."""
    tmp_path.mkdir()
    with fake_arm(tmp_path) as arm, dynamic_host() as host:
        arm.operation_seconds = OPERATION_SECONDS

        def connected(cls: type) -> str:
            return serialize_provider(cls(endpoint=arm.base_url, credential=DEPLOYER, connection_verify=arm.ca_file,
                                          polling_interval=POLL_SECONDS))

        provider = connected(provider_class)

        def create(inputs: dict[str, Any]) -> tuple[float, dict[str, Any]]:
            answer = host.Create(proto.CreateRequest(urn=f"{URN}{inputs['vmScaleSetName']}",
                                                     properties=props({**inputs, "__provider": provider})))
            return time.monotonic(), {**unprops(answer.properties), "id": answer.id}

        started = time.monotonic()
        with ThreadPoolExecutor(len(sets)) as engine:
            running = [engine.submit(create, inputs) for inputs in sets[:-1]]
            time.sleep(OPERATION_SECONDS)  # the host is busiest now: before, every worker is held
            check_wait = _check(host, sets[-1], provider)
            answered = [f.result() for f in running]
        creates = max(at for at, _ in answered) - started
        check_in_wait = None
        if wait is not None:
            outs = {o["vmScaleSetName"]: o for _, o in answered}
            entries = [{**e, "id": outs[e["name"]]["id"], "operation": outs[e["name"]]["operation"]}
                       for e in wait["scaleSets"] if e["name"] in outs]
            waiting = threading.Thread(target=host.Create, args=(proto.CreateRequest(
                urn=f"{URN}prod-nodes-ready", properties=props({**wait, "scaleSets": entries,
                                                                "__provider": connected(ScaleSetsReadyProvider)})),))
            waiting.start()
            time.sleep(OPERATION_SECONDS / 4)  # the wait is polling: a Check sent now
            check_in_wait = _check(host, sets[-1], provider)
            waiting.join()
        ready = time.monotonic() - started
        return Measured(creates, ready, _in_flight(arm), check_wait, check_in_wait)


def _in_flight(arm: FakeArm) -> int:
    assert len(arm.calls("PUT")) == 42
    return arm.most_in_flight()


def test_prods_creates_no_longer_run_in_waves_of_four(tmp_path: Path, prod_sets: list[dict[str, Any]],
                                                      prod_wait: dict[str, Any]) -> None:
    before = _run(tmp_path / "before", HeldWorkerProvider, prod_sets, None)
    # never more than 4 operations at once: 11 waves (the last of 2), each at least one operation long, and the
    # Check queued behind the held workers
    assert before.in_flight == HOST_WORKERS and before.ready >= waves(42) * OPERATION_SECONDS
    assert before.check_wait >= OPERATION_SECONDS / 2

    after = _run(tmp_path / "after", ScaleSetProvider, prod_sets, prod_wait)
    # the creates return on ARM's answer, so more operations run at once than the host has workers; a Check waits for
    # the creates' answers only (CPU, not allocations), and not behind the wait, which holds one worker. When every
    # scale set was up is printed, not compared: at 0.4 s operations it is mostly the creates' CPU, which a loaded
    # machine stretches, against the waves' sleeps, which it does not.
    assert after.in_flight > HOST_WORKERS
    assert after.check_wait < before.check_wait and after.check_in_wait is not None
    assert after.check_in_wait < OPERATION_SECONDS * 2
    print(f"\n42 creates of {OPERATION_SECONDS} s operations through the host: before {before.ready:.2f} s until all "
          f"were up, at most {before.in_flight} in flight, a Check waited {before.check_wait:.2f} s; now the creates "
          f"answered in {after.creates:.2f} s, all were up after {after.ready:.2f} s, at most {after.in_flight} in "
          f"flight, a Check waited {after.check_wait:.2f} s during the creates and {after.check_in_wait:.2f} s during "
          "the wait")
