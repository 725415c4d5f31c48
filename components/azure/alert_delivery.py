"""Where the workspace's alerts go: the stack's own action group (its e-mails, webhooks and built-in roles' members)
and the existing groups it names, as the `actions` of every alert rule (docs/metrics.md, "Alert delivery").

An action group is a global resource (location `Global`) whose short name, used in SMS and e-mail, has at most 12
characters (Microsoft Learn, "Resource Manager template samples for action groups in Azure Monitor"); receivers use
the common alert schema. ARM role receivers e-mail the subscription's members in a built-in role (Azure REST API,
Action Groups - Create Or Update: "only built-in roles are supported").
"""

from __future__ import annotations

import re

import pulumi
import pulumi_azure_native as azure

from gpucluster.azure.scope import AzureScope
from gpucluster.catalog.azure_roles import MONITORING_READER
from gpucluster.catalog.deploy_runner import CONTRIBUTOR, OWNER
from gpucluster.spec.alerts import AlertsSpec

ARM_ROLE_IDS = {"Owner": OWNER, "Contributor": CONTRIBUTOR, "Monitoring Reader": MONITORING_READER}
SHORT_NAME_MAX = 12


def short_name(cluster: str) -> str:
    """The group's short name: the cluster's letters and digits, cut to 12 (what a receiver sees as the sender)."""
    return (re.sub(r"[^A-Za-z0-9]", "", cluster) or "gpucluster")[:SHORT_NAME_MAX]


def _receiver_name(prefix: str, index: int) -> str:
    return f"{prefix}-{index}"


def action_group(name: str, alerts: AlertsSpec, scope: AzureScope,
                 parent: pulumi.Resource) -> azure.monitor.ActionGroup | None:
    """The stack's own action group, or None when it names receivers only through existing groups."""
    if not alerts.own_group:
        return None
    return azure.monitor.ActionGroup(
        f"{name}-alerts", resource_group_name=scope.resource_group_name, location="Global", enabled=True,
        group_short_name=short_name(scope.cluster), tags=dict(scope.tags),
        email_receivers=[azure.monitor.MicrosoftCommonEmailReceiverArgs(
            name=_receiver_name("email", i), email_address=address, use_common_alert_schema=True)
            for i, address in enumerate(alerts.emails)],
        webhook_receivers=[azure.monitor.WebhookReceiverArgs(
            name=_receiver_name("webhook", i), service_uri=uri, use_common_alert_schema=True)
            for i, uri in enumerate(alerts.webhooks)],
        arm_role_receivers=[azure.monitor.ArmRoleReceiverArgs(
            name=_receiver_name("role", i), role_id=ARM_ROLE_IDS[role], use_common_alert_schema=True)
            for i, role in enumerate(alerts.arm_roles)],
        opts=pulumi.ResourceOptions(parent=parent))


def rule_actions(alerts: AlertsSpec, own: azure.monitor.ActionGroup | None,
                 ) -> list[azure.alertsmanagement.PrometheusRuleGroupActionArgs]:
    """The `actions` of every alert rule: the stack's own group first, then the existing ones."""
    ids: list[pulumi.Input[str]] = [own.id] if own is not None else []
    ids += alerts.action_group_ids
    return [azure.alertsmanagement.PrometheusRuleGroupActionArgs(action_group_id=i) for i in ids]
