"""The rack charts' per-node API clients (NVIDIA DRA driver's kubelet plugin and ComputeDomain daemons, DRANET) are
node agents like the others: routed to the node agents' API Priority and Fairness level and counted in the plan's
agent load, on rack nodes only (components/catalog/flowcontrol.py RACK_CHART_AGENTS, each row with the chart files
its service account and rights were read from)."""

from __future__ import annotations

import pytest

from gpucluster.catalog.flowcontrol import RACK_CHART_AGENTS
from gpucluster.kubernetes.objects.flowcontrol import NODE_AGENTS
from gpucluster.offline.engine import ProgramRun, run_program
from gpucluster.offline.manifests import kubernetes_objects
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.simulation.check import plan_checked
from gpucluster.spec import load_stack_file
from tests.support.stacks import ROOT, STACKS, stack_spec

RACK_ACCOUNTS = {("nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu-service-account-kubeletplugin"),
                 ("nvidia-dra-driver-gpu", "compute-domain-daemon-service-account"), ("kube-system", "dranet")}


@pytest.fixture(scope="module")
def gb300_run() -> ProgramRun:
    config = load_stack_file(STACKS / "Pulumi.gb300.yaml", "gb300").config
    return run_program(ROOT / "__main__.py", "gpucluster", "gb300", config)


@pytest.fixture(scope="module")
def gb300() -> ClusterPlan:
    return plan_checked(stack_spec("gb300"))


def _schema_subjects(run: ProgramRun) -> set[tuple[str, str]]:
    schema = next(o for o in kubernetes_objects(run.registrations)
                  if o["kind"] == "FlowSchema" and o["metadata"]["name"] == NODE_AGENTS)
    return {(s["serviceAccount"]["namespace"], s["serviceAccount"]["name"]) for s in schema["spec"]["rules"][0]["subjects"]}


def test_the_table_names_the_rack_charts_accounts() -> None:
    assert {(a.namespace, a.service_account) for a in RACK_CHART_AGENTS} == RACK_ACCOUNTS


def test_rack_agents_are_in_the_node_agents_flow_schema(gb300_run: ProgramRun) -> None:
    assert _schema_subjects(gb300_run) >= RACK_ACCOUNTS


def test_rack_agents_count_in_the_agent_load_on_rack_nodes(gb300: ClusterPlan) -> None:
    assert gb300.agent_load is not None
    rack_nodes = sum(p.nodes for p in gb300.pools if p.racks is not None)
    loads = {(a.namespace, a.service_account): a for a in gb300.agent_load.agents}
    assert rack_nodes and all(loads[account].nodes == rack_nodes for account in RACK_ACCOUNTS)
    # Their request rates were not read as a fixed figure: listed as not modelled, never as zero.
    assert all(loads[account] in gb300.agent_load.unmodelled for account in RACK_ACCOUNTS)


def test_clusters_without_racks_route_no_rack_agent(prod_run: ProgramRun) -> None:
    assert not RACK_ACCOUNTS & _schema_subjects(prod_run)
    plan = plan_checked(stack_spec("dev"))
    assert plan.agent_load is not None
    assert not RACK_ACCOUNTS & {(a.namespace, a.service_account) for a in plan.agent_load.agents}
