"""The Azure Monitor workspace's rule groups are the groups the metrics plan checked against the workspace's limits
(components/azure/metrics_workspace.py cuts them as MetricsPlan.rule_groups says), and the ids ARM hands back are
read whatever the case of their segments."""

from __future__ import annotations

from gpucluster.azure.metrics_workspace import _parts
from gpucluster.catalog.metrics import WORKSPACE_LIMITS
from gpucluster.offline.engine import ProgramRun
from gpucluster.planning.cluster_plan import plan_cluster
from tests.support.stacks import stack_spec


def test_the_deployed_rule_groups_are_the_planned_ones(prod_run: ProgramRun) -> None:
    metrics = plan_cluster(stack_spec("prod")).metrics
    assert metrics is not None
    groups = sorted((r for r in prod_run.registrations if r.type == "azure-native:alertsmanagement:PrometheusRuleGroup"),
                    key=lambda r: (not r.name.endswith("-recording"), r.name))
    assert [len(r.inputs["rules"]) for r in groups] == list(metrics.rule_groups)
    assert max(metrics.rule_groups) <= WORKSPACE_LIMITS["rulesPerGroup"].value


def test_an_arm_id_is_read_whatever_the_case_of_its_segments() -> None:
    rule = "/subscriptions/s/resourcegroups/MA_ws_eastus2_managed/providers/Microsoft.Insights/dataCollectionRules/ws"
    assert _parts(rule) == ("MA_ws_eastus2_managed", "ws")
    assert _parts(rule.replace("resourcegroups", "resourceGroups")) == ("MA_ws_eastus2_managed", "ws")
