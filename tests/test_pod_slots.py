"""Pods per node: the first boot's per-node DaemonSet pods (the layer's and the charts', DRA drivers included)
against kubelet maxPods and the NIC's pod addresses (components/simulation/pod_slots.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpucluster.errors import SpecError
from gpucluster.simulation.check import plan_checked
from gpucluster.spec import CONFIG_KEY, load_stack_file
from tests.support.stacks import STACKS, spec_of

RACK_NODE_PODS = {
    "cilium-agent", "cilium-envoy", "node-local-dns", "nfd-worker", "nvidia-container-toolkit", "nvidia-device-plugin",
    "nvidia-dcgm", "nvidia-dcgm-exporter", "gpu-feature-discovery", "nvidia-operator-validator", "gpu-health-gb300",
    "dranet", "nvidia-dra-driver-gpu-kubelet-plugin", "compute-domain-daemon", "node-exporter"}
"""docs/rack-scale.md "Pods per node": what a rack node runs before any work (Cilium agent and envoy, node-local-dns,
NFD worker, toolkit, device plugin, DCGM, exporter, GFD, validator, health agent, DRANET, DRA kubelet plugin, one
compute-domain daemon, and node_exporter of the metrics pipeline, on the host network: docs/metrics.md)."""


def _raw() -> dict[str, Any]:
    return copy.deepcopy(load_stack_file(STACKS / "Pulumi.gb300.yaml", "gb300").config[CONFIG_KEY])


def test_a_rack_node_counts_every_system_pod_and_keeps_a_pod_per_gpu() -> None:
    plan = plan_checked(spec_of(_raw()))
    assert plan.bring_up is not None
    rack = next(n for n in plan.bring_up.node_pods if n.pool == "gb300")
    assert set(rack.daemonsets) == RACK_NODE_PODS
    assert rack.system_pods == 15 and rack.max_pods == 24 and rack.work_pods == 4 and rack.free_pods >= 4


def test_sixteen_pods_on_a_rack_node_is_refused_with_the_fix() -> None:
    raw = _raw()
    raw["pools"][1]["podsPerNode"] = 16
    with pytest.raises(SpecError) as refused:
        plan_checked(spec_of(raw))
    [problem] = [p for p in refused.value.problems if p.path == "cluster.pools[1].podsPerNode"]
    assert "15 per-node system pods" in problem.message and "leave 1 of 16 pods for work" in problem.message
    assert "set podsPerNode to at least 19" in problem.message


def test_work_pods_per_node_is_what_the_stack_asks() -> None:
    raw = _raw()
    raw["pools"][1]["workPodsPerNode"] = 11
    with pytest.raises(SpecError) as refused:
        plan_checked(spec_of(raw))
    assert any("fewer than the 11 workPodsPerNode asks; set podsPerNode to at least 26" in p.message
               for p in refused.value.problems)


def test_by_default_a_node_must_keep_one_pod_for_work() -> None:
    from tests.support.stacks import small_cluster

    raw = small_cluster()
    raw["pools"][1]["podsPerNode"] = 13  # the GPU pool's 13 per-node system pods fill it
    with pytest.raises(SpecError) as refused:
        plan_checked(spec_of(raw))
    assert any(p.path == "cluster.pools[1].podsPerNode" and "leave 0 of 13 pods" in p.message
               and "fewer than the 1 workPodsPerNode" in p.message for p in refused.value.problems)
