"""How long prod's 43 scale-set creates take through Pulumi's real dynamic-provider host, modelled.

The host (pulumi 3.272 `pulumi/dynamic/__main__.py`) serves RPCs from `ThreadPoolExecutor(max_workers=4)`, and our
create holds its worker until ARM's long-running operation ends. The engine sends every create at once (`pulumi up
--parallel` is unbounded by default), so 43 creates run in ceil(43 / 4) = 11 waves, and a Check or Diff of any other
dynamic resource sent meanwhile waits for a free worker. Here the fake ARM's operations take OPERATION_SECONDS
(a stand-in for Azure's create of a scale set): the wall time of the 43 creates is measured against the model,
and so is the wait of a Check sent behind them. docs/performance.md has the figures and what they mean at Azure's
durations.
"""

from __future__ import annotations

import copy
import math
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pulumi.dynamic.dynamic import serialize_provider
from pulumi.runtime import proto

from components.azure.scale_set_provider import ScaleSetProvider
from components.offline.engine import ProgramRun
from tests.support.dynamic_host import dynamic_host, props
from tests.support.fake_arm import DEPLOYER, fake_arm

HOST_WORKERS = 4
"""pulumi/dynamic/__main__.py main(): grpc.server(futures.ThreadPoolExecutor(max_workers=4))."""
OPERATION_SECONDS = 0.4


def waves(scale_sets: int, workers: int = HOST_WORKERS) -> int:
    return math.ceil(scale_sets / workers)


def test_prods_creates_run_in_waves_of_four_and_a_check_waits_behind_them(tmp_path: Path,
                                                                          prod_run: ProgramRun) -> None:
    sets = [{k: v for k, v in copy.deepcopy(r.inputs).items() if k != "__provider"} for r in prod_run.registrations
            if r.custom and r.inputs.get("armType") == "Microsoft.Compute/virtualMachineScaleSets"]
    assert len(sets) == 43 and waves(len(sets)) == 11
    with fake_arm(tmp_path) as arm, dynamic_host() as host:
        arm.operation_seconds = OPERATION_SECONDS
        provider = serialize_provider(ScaleSetProvider(endpoint=arm.base_url, credential=DEPLOYER,
                                                       connection_verify=arm.ca_file, polling_interval=0.05))

        def create(inputs: dict[str, Any]) -> float:
            host.Create(proto.CreateRequest(urn=f"urn:pulumi:prod::gpucluster::pulumi-python:dynamic:Resource::"
                                                f"{inputs['vmScaleSetName']}", properties=props({**inputs,
                                                                                               "__provider": provider})))
            return time.monotonic()

        started = time.monotonic()
        with ThreadPoolExecutor(len(sets) + 1) as engine:
            running = [engine.submit(create, inputs) for inputs in sets[:-1]]
            time.sleep(OPERATION_SECONDS)  # every worker is busy now
            asked = time.monotonic()
            host.Check(proto.CheckRequest(urn="urn:pulumi:prod::gpucluster::pulumi-python:dynamic:Resource::late",
                                          olds=props({}), news=props({**sets[-1], "__provider": provider})))
            check_wait = time.monotonic() - asked
            finished = [f.result() for f in running]
        wall = max(finished) - started
        creates, in_flight = len(arm.calls("PUT")), arm.most_in_flight()
    # 42 creates, never more than 4 at once: 11 waves (the last of 2), each at least one operation long
    assert creates == 42 and in_flight == HOST_WORKERS
    assert wall >= waves(42) * OPERATION_SECONDS
    assert check_wait >= OPERATION_SECONDS / 2  # the Check queued behind the busy workers
    print(f"\n42 creates of {OPERATION_SECONDS} s operations: {wall:.2f} s wall, at most {in_flight} in flight "
          f"({wall / OPERATION_SECONDS:.1f} operation lengths; unbounded it would be 1 plus overhead); a Check sent "
          f"behind them waited {check_wait:.2f} s")
