"""MetricsWorkspace: the Azure Monitor workspace the edge Prometheus shards remote-write to, its rule groups and the
identity that writes (docs/metrics.md).

Creating a workspace creates its default data collection endpoint and rule (`defaultIngestionSettings`); the shards
write to `<endpoint's metrics ingestion URL>/dataCollectionRules/<rule's immutable id>/streams/...` as the metrics
identity, which holds the built-in Monitoring Metrics Publisher role on that rule only. The identity is attached to
the system pool's scale sets, where the shards run.
"""

from __future__ import annotations

import pulumi
import pulumi_azure_native as azure

from components.catalog.azure_roles import role_definition_id
from components.catalog.metrics import MONITORING_METRICS_PUBLISHER, REMOTE_WRITE_PATH
from components.planning import azure_names as names
from components.planning.metrics import ALERT_GROUP_SIZE, MetricsPlan
from components.planning.metrics_rules import WORKSPACE_RULES, AlertRule, alert_rules

SEVERITY = {"critical": 1, "warning": 3}
"""Azure Monitor's alert severities: 0 critical ... 4 verbose; ours map to 1 (error) and 3 (informational)."""


def _iso_minutes(duration: str) -> str:
    """`10m` -> `PT10M` (the rule group's `for` and `interval` are ISO 8601 durations)."""
    return f"PT{int(duration.removesuffix('m'))}M"


def _alert(rule: AlertRule) -> azure.alertsmanagement.PrometheusRuleArgs:
    return azure.alertsmanagement.PrometheusRuleArgs(
        alert=rule.alert, expression=rule.expr, for_=_iso_minutes(rule.for_), severity=SEVERITY[rule.severity],
        annotations={"summary": rule.summary}, labels={"severity": rule.severity})


def _parts(resource_id: str) -> tuple[str, str]:
    """(resource group, name) of an ARM id."""
    segments = resource_id.split("/")
    return segments[segments.index("resourceGroups") + 1], segments[-1]


class MetricsWorkspace(pulumi.ComponentResource):
    def __init__(self, name: str, cluster: str, plan: MetricsPlan, inflight_limit: int,
                 resource_group_name: pulumi.Input[str], location: str, tags: dict[str, str],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:azure:MetricsWorkspace", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.workspace = azure.monitor.AzureMonitorWorkspace(
            f"{name}-workspace", resource_group_name=resource_group_name, location=location, tags=tags, opts=child)
        ingestion = self.workspace.default_ingestion_settings
        rule_id = ingestion.apply(lambda s: s.data_collection_rule_resource_id)
        endpoint_id = ingestion.apply(lambda s: s.data_collection_endpoint_resource_id)
        rule = rule_id.apply(_parts).apply(lambda p: azure.monitor.get_data_collection_rule_output(
            resource_group_name=p[0], data_collection_rule_name=p[1]))
        endpoint = endpoint_id.apply(_parts).apply(lambda p: azure.monitor.get_data_collection_endpoint_output(
            resource_group_name=p[0], data_collection_endpoint_name=p[1]))
        self.remote_write_url: pulumi.Output[str] = pulumi.Output.all(
            endpoint.apply(lambda e: e.metrics_ingestion.endpoint if e.metrics_ingestion else ""),
            rule.apply(lambda r: r.immutable_id)).apply(
            lambda parts: f"{parts[0]}/dataCollectionRules/{parts[1]}{REMOTE_WRITE_PATH}")
        self.identity = azure.managedidentity.UserAssignedIdentity(
            f"{name}-writer", resource_group_name=resource_group_name, location=location, tags=tags, opts=child)
        client = azure.authorization.get_client_config_output()
        azure.authorization.RoleAssignment(
            f"{name}-writer-publisher", principal_id=self.identity.principal_id, principal_type="ServicePrincipal",
            role_definition_id=client.subscription_id.apply(lambda sub: role_definition_id(
                sub, MONITORING_METRICS_PUBLISHER)),
            role_assignment_name=client.subscription_id.apply(
                lambda sub: names.deterministic_guid(sub, names.resource_group_name(cluster), "metrics-publisher")),
            scope=rule_id, opts=child)
        # Domain and team aggregates over every shard's series, then the alerts, at most 20 rules a group.
        groups: list[tuple[str, list[azure.alertsmanagement.PrometheusRuleArgs]]] = [("recording", [
            azure.alertsmanagement.PrometheusRuleArgs(record=r.record, expression=r.expr) for r in WORKSPACE_RULES])]
        alerts = [_alert(a) for a in alert_rules(inflight_limit)]
        groups += [(f"alerts-{i // ALERT_GROUP_SIZE}", alerts[i:i + ALERT_GROUP_SIZE])
                   for i in range(0, len(alerts), ALERT_GROUP_SIZE)]
        self.rule_groups = [azure.alertsmanagement.PrometheusRuleGroup(
            f"{name}-{group}", resource_group_name=resource_group_name, location=location, tags=tags,
            scopes=[self.workspace.id], cluster_name=cluster, enabled=True,
            interval=f"PT{plan.rule_interval_seconds // 60}M", rules=rules, opts=child) for group, rules in groups]
        self.client_id: pulumi.Output[str] = self.identity.client_id
        self.register_outputs({"workspaceId": self.workspace.id, "remoteWriteUrl": self.remote_write_url})
