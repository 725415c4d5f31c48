"""Every alert reaches someone (components/azure/alert_delivery.py, cluster.metrics.alerts): the stack's own action
group with its receivers and the existing groups it names are the `actions` of every alert rule; a stack whose
alerts would reach no one does not plan."""

from __future__ import annotations

from typing import Any

import pytest

from gpucluster.errors import SpecError
from gpucluster.offline.engine import ProgramRun, run_program
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.planning.metrics_rules import alert_rules
from tests.support.stacks import ROOT, small_cluster, spec_of

GROUP = "azure-native:monitor:ActionGroup"
RULES = "azure-native:alertsmanagement:PrometheusRuleGroup"
EXISTING = ("/subscriptions/11111111-2222-3333-4444-555555555555/resourceGroups/oncall/providers/"
            "Microsoft.Insights/actionGroups/pager")


def _problems(alerts: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as refused:
        plan_cluster(spec_of(small_cluster(metrics={"alerts": alerts})))
    return [str(p) for p in refused.value.problems]


def test_alerts_that_reach_no_one_do_not_plan() -> None:
    [problem] = _problems({})
    assert problem.startswith("cluster.metrics.alerts: the ") and "would reach no one" in problem
    assert "armRoles" in problem and "actionGroupIds" in problem


def test_more_action_groups_than_a_rule_takes_do_not_plan() -> None:
    ids = [EXISTING.replace("pager", f"pager{i}") for i in range(5)]
    [problem] = _problems({"emails": ["oncall@corp.example"], "actionGroupIds": ids})
    assert problem.startswith("cluster.metrics.alerts.actionGroupIds: an alert rule takes at most 5 action groups "
                              "and this stack gives 6")


@pytest.mark.parametrize(("key", "value", "said"), [
    ("emails", "oncall", "is not an e-mail address"), ("webhooks", "http://pager/x", "is not an https:// URL"),
    ("actionGroupIds", "/subscriptions/x/pager", "is not an action group's resource id"),
    ("armRoles", "Global Administrator", "Owner")])
def test_a_receiver_that_is_not_one_names_its_key(key: str, value: str, said: str) -> None:
    with pytest.raises(SpecError) as refused:
        spec_of(small_cluster(metrics={"alerts": {key: [value]}}))
    [problem] = refused.value.problems
    assert problem.path.startswith(f"cluster.metrics.alerts.{key}") and said in problem.message


def _run(alerts: dict[str, Any]) -> ProgramRun:
    return run_program(ROOT / "__main__.py", "gpucluster", "test",
                       {"gpucluster:cluster": small_cluster(metrics={"alerts": alerts})})


def _alert_rules(run: ProgramRun) -> list[dict[str, Any]]:
    return [rule for r in run.registrations if r.type == RULES for rule in r.inputs["rules"] if "alert" in rule]


def test_every_alert_goes_to_the_stacks_own_group_then_the_existing_ones() -> None:
    run = _run({"emails": ["oncall@corp.example"], "webhooks": ["https://pager.corp.example/hook"],
                "armRoles": ["Owner", "Monitoring Reader"], "actionGroupIds": [EXISTING]})
    [group] = [r for r in run.registrations if r.type == GROUP]
    assert group.inputs["location"] == "Global" and group.inputs["enabled"] is True
    assert len(group.inputs["groupShortName"]) <= 12
    assert [e["emailAddress"] for e in group.inputs["emailReceivers"]] == ["oncall@corp.example"]
    assert [w["serviceUri"] for w in group.inputs["webhookReceivers"]] == ["https://pager.corp.example/hook"]
    assert [r["roleId"] for r in group.inputs["armRoleReceivers"]] == [
        "8e3af657-a8ff-443c-a75c-2fe8c4bcb635", "43d0d8ad-25c7-4714-9337-8ba259a9fe05"]
    receivers = [*group.inputs["emailReceivers"], *group.inputs["webhookReceivers"], *group.inputs["armRoleReceivers"]]
    assert all(r["useCommonAlertSchema"] for r in receivers)
    rules = _alert_rules(run)
    assert {r["alert"] for r in rules} == {a.alert for a in alert_rules(1, 1)}
    for rule in rules:
        ids = [a["actionGroupId"] for a in rule["actions"]]
        assert ids[1:] == [EXISTING] and ids[0].endswith(f"/actionGroups/{group.inputs['actionGroupName']}"), rule
    recording = [rule for r in run.registrations if r.type == RULES for rule in r.inputs["rules"] if "record" in rule]
    assert recording and not any(r.get("actions") for r in recording)


def test_existing_groups_alone_make_no_group_of_the_stacks_own() -> None:
    run = _run({"actionGroupIds": [EXISTING]})
    assert not [r for r in run.registrations if r.type == GROUP]
    assert all([a["actionGroupId"] for a in r["actions"]] == [EXISTING] for r in _alert_rules(run))
