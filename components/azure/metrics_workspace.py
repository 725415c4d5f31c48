"""MetricsWorkspace: the Azure Monitor workspace the edge Prometheus shards remote-write to, its rule groups and the
identity that writes (docs/metrics.md).

Creating a workspace creates its default data collection endpoint and rule (`defaultIngestionSettings`); the shards
write to `<endpoint's metrics ingestion URL>/dataCollectionRules/<rule's immutable id>/streams/...` as the metrics
identity, which holds the built-in Monitoring Metrics Publisher role on that rule only. The identity is attached to
the system pool's scale sets, where the shards run.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_azure_native as azure

from gpucluster.azure.alert_delivery import action_group, rule_actions
from gpucluster.azure.scope import AzureScope
from gpucluster.catalog.azure_roles import role_definition_id
from gpucluster.catalog.metrics import MONITORING_METRICS_PUBLISHER, REMOTE_WRITE_PATH
from gpucluster.planning import azure_names as names
from gpucluster.planning.metrics import MetricsPlan
from gpucluster.planning.metrics_rules import WORKSPACE_RULES, AlertRule, alert_rules

SEVERITY = {"critical": 1, "warning": 3}
"""Azure Monitor's alert severities: 0 critical ... 4 verbose; ours map to 1 (error) and 3 (informational)."""


def _iso_minutes(duration: str) -> str:
    """`10m` -> `PT10M` (the rule group's `for` and `interval` are ISO 8601 durations)."""
    return f"PT{int(duration.removesuffix('m'))}M"


def _alert(rule: AlertRule, actions: list[azure.alertsmanagement.PrometheusRuleGroupActionArgs],
           ) -> azure.alertsmanagement.PrometheusRuleArgs:
    return azure.alertsmanagement.PrometheusRuleArgs(
        actions=actions,
        alert=rule.alert, expression=rule.expr, for_=_iso_minutes(rule.for_), severity=SEVERITY[rule.severity],
        annotations={"summary": rule.summary, **({"unverified": rule.unverified} if rule.unverified else {})},
        labels={"severity": rule.severity})


def _parts(resource_id: str) -> tuple[str, str]:
    """(resource group, name) of an ARM id (ARM may answer `resourcegroups` in any case)."""
    segments = resource_id.strip("/").split("/")
    return segments[[s.lower() for s in segments].index("resourcegroups") + 1], segments[-1]


@dataclass(frozen=True)
class MetricsWorkspaceArgs:
    """The inputs of MetricsWorkspace."""

    scope: AzureScope
    """Where the workspace, its writer identity and rule groups go."""
    plan: MetricsPlan
    """The metrics plan (`plan.metrics`): the rule groups' sizes and evaluation interval."""
    inflight_limit: int
    """The API servers' max-requests-inflight plus max-mutating-requests-inflight: the saturation alerts' limit."""


class MetricsWorkspace(pulumi.ComponentResource):
    """The Azure Monitor workspace the edge Prometheus shards write aggregates to, its writer identity, the
    workspace's recording rules and alerts (docs/metrics.md)."""

    workspace: azure.monitor.AzureMonitorWorkspace
    """The workspace."""
    remote_write_url: pulumi.Output[str]
    """Where the shards remote-write: the ingestion endpoint and the default data collection rule."""
    client_id: pulumi.Output[str]
    """The writer identity's client id (Monitoring Metrics Publisher on the rule)."""
    managed_group_id: pulumi.Output[str]
    """The resource group Azure made for the workspace's default data collection rule and endpoint."""

    def __init__(self, name: str, args: MetricsWorkspaceArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:azure:MetricsWorkspace", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        where, plan, inflight_limit = args.scope, args.plan, args.inflight_limit
        cluster, resource_group_name, location, tags = where.cluster, where.resource_group_name, where.location, \
            dict(where.tags)
        subscription_id = pulumi.Output.from_input(where.subscription_id)
        self.workspace = azure.monitor.AzureMonitorWorkspace(
            f"{name}-workspace", resource_group_name=resource_group_name, location=location, tags=tags, opts=child)
        ingestion = self.workspace.default_ingestion_settings
        rule_id = ingestion.apply(lambda s: s.data_collection_rule_resource_id)
        # Azure puts the workspace's default rule and endpoint in a resource group of its own
        # (MA_<workspace>_<location>_managed), outside the cluster's: whoever runs the program reads them there.
        self.managed_group_id = rule_id.apply(lambda i: i.split("/providers/", 1)[0])
        endpoint_id = ingestion.apply(lambda s: s.data_collection_endpoint_resource_id)
        rule = rule_id.apply(_parts).apply(lambda p: azure.monitor.get_data_collection_rule_output(
            resource_group_name=p[0], data_collection_rule_name=p[1]))
        endpoint = endpoint_id.apply(_parts).apply(lambda p: azure.monitor.get_data_collection_endpoint_output(
            resource_group_name=p[0], data_collection_endpoint_name=p[1]))
        self.remote_write_url = pulumi.Output.all(
            endpoint.apply(lambda e: e.metrics_ingestion.endpoint if e.metrics_ingestion else ""),
            rule.apply(lambda r: r.immutable_id)).apply(
            lambda parts: f"{parts[0]}/dataCollectionRules/{parts[1]}{REMOTE_WRITE_PATH}")
        self.identity = azure.managedidentity.UserAssignedIdentity(
            f"{name}-writer", resource_group_name=resource_group_name, location=location, tags=tags, opts=child)
        azure.authorization.RoleAssignment(
            f"{name}-writer-publisher", principal_id=self.identity.principal_id, principal_type="ServicePrincipal",
            role_definition_id=subscription_id.apply(lambda sub: role_definition_id(
                sub, MONITORING_METRICS_PUBLISHER)),
            role_assignment_name=subscription_id.apply(
                lambda sub: names.deterministic_guid(sub, names.resource_group_name(cluster), "metrics-publisher")),
            scope=rule_id, opts=child)
        # Domain and team aggregates over every shard's series, then the alerts, at most 20 rules a group.
        groups: list[tuple[str, list[azure.alertsmanagement.PrometheusRuleArgs]]] = [("recording", [
            azure.alertsmanagement.PrometheusRuleArgs(record=r.record, expression=r.expr) for r in WORKSPACE_RULES])]
        # Cut as the plan cut them (MetricsPlan.rule_groups: what the workspace's limits were checked against).
        self.action_group = action_group(name, plan.alerts, where, self)
        actions = rule_actions(plan.alerts, self.action_group)
        alerts = [_alert(a, actions) for a in alert_rules(inflight_limit, plan.shards)]
        recording, *alert_sizes = plan.rule_groups
        assert recording == len(WORKSPACE_RULES) and sum(alert_sizes) == len(alerts), "the plan's rule groups"
        starts = [sum(alert_sizes[:i]) for i in range(len(alert_sizes))]
        groups += [(f"alerts-{i}", alerts[start:start + size])
                   for i, (start, size) in enumerate(zip(starts, alert_sizes, strict=True))]
        self.rule_groups = [azure.alertsmanagement.PrometheusRuleGroup(
            f"{name}-{group}", resource_group_name=resource_group_name, location=location, tags=tags,
            scopes=[self.workspace.id], cluster_name=cluster, enabled=True,
            interval=f"PT{plan.rule_interval_seconds // 60}M", rules=rules, opts=child) for group, rules in groups]
        self.client_id = self.identity.client_id
        self.register_outputs({"workspaceId": self.workspace.id, "remoteWriteUrl": self.remote_write_url,
                               "clientId": self.client_id})
