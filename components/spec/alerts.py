"""`cluster.metrics.alerts`: where the workspace's alerts are delivered (docs/metrics.md, "Alert delivery").

An Azure Monitor alert rule notifies through action groups, at most five per rule (Microsoft Learn, "Configure
alerts and responses: Action groups"). The stack names receivers the library puts in one action group of its own
(e-mail addresses, webhooks, and the subscription's members in a built-in role, by e-mail), and existing groups by
id. A stack whose alerts would go nowhere does not plan.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from gpucluster.spec.base import SpecModel

MAX_ACTION_GROUPS = 5
"""Action groups per alert rule (Microsoft Learn training "Configure alerts and responses", unit "Action groups":
"You can add up to five action groups to an alert rule")."""
EMAIL = r"^[^@\s]+@[^@\s]+\.[^@\s]+$"
WEBHOOK = r"^https://[^\s]+$"
ACTION_GROUP_ID = (r"^/subscriptions/[0-9a-fA-F-]{36}/resourceGroups/[-\w.()]{1,90}/providers/"
                   r"(?i:microsoft\.insights)/(?i:actionGroups)/[-\w.]{1,260}$")
ArmRole = Literal["Owner", "Contributor", "Monitoring Reader"]
"""Built-in roles whose members an action group can e-mail (armRoleReceivers take built-in roles only: Azure REST
API, Action Groups - Create Or Update); their ids are in components/catalog."""


class AlertsSpec(SpecModel):
    emails: list[str] = Field(default_factory=list, max_length=20)
    """Addresses e-mailed when an alert fires or resolves (Azure Monitor's common alert schema)."""
    webhooks: list[str] = Field(default_factory=list, max_length=10)
    """https URLs posted the alert (common alert schema): a pager or chat integration."""
    arm_roles: list[ArmRole] = Field(default_factory=list, max_length=3)
    """The subscription's members in these built-in roles, e-mailed: no address to keep up to date."""
    action_group_ids: list[str] = Field(default_factory=list, max_length=MAX_ACTION_GROUPS)
    """Existing action groups (their resource ids), beside or instead of the stack's own."""

    @field_validator("emails")
    @classmethod
    def _emails(cls, values: list[str]) -> list[str]:
        return _matching(values, EMAIL, "an e-mail address (name@domain)")

    @field_validator("webhooks")
    @classmethod
    def _webhooks(cls, values: list[str]) -> list[str]:
        return _matching(values, WEBHOOK, "an https:// URL")

    @field_validator("action_group_ids")
    @classmethod
    def _groups(cls, values: list[str]) -> list[str]:
        return _matching(values, ACTION_GROUP_ID, "an action group's resource id: /subscriptions/<id>/resourceGroups/"
                                                  "<group>/providers/Microsoft.Insights/actionGroups/<name>")

    @property
    def own_group(self) -> bool:
        """Whether the stack declares receivers of its own, and so an action group of its own."""
        return bool(self.emails or self.webhooks or self.arm_roles)


def _matching(values: list[str], pattern: str, what: str) -> list[str]:
    for value in values:
        if not re.match(pattern, value):
            raise ValueError(f"{value!r} is not {what}")
    if len(set(values)) != len(values):
        raise ValueError("lists a value twice")
    return values
