"""The bootstrap tokens (`[a-z0-9]{6}.[a-z0-9]{16}`) from pulumi-random, kept secret: two slots, current and
previous, rotated by their keepers (components/planning/bootstrap_tokens.py).

The id part is public by kubeadm's design (it names the Secret `bootstrap-token-<id>` in kube-system); the
secret part authenticates.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_random as random

from gpucluster.planning.bootstrap_tokens import TokenSchedule


@dataclass(frozen=True)
class BootstrapTokensArgs:
    """The inputs of BootstrapTokens."""

    schedule: TokenSchedule
    """The two slots' rotation periods (`plan.tokens`): which slot is current, when each is replaced."""


class BootstrapTokens(pulumi.ComponentResource):
    """Two bootstrap-token slots, current and previous, replaced in turn by their keepers."""

    schedule: TokenSchedule
    """The slots' rotation periods it was declared from."""
    current: pulumi.Output[str]
    """The token new scale-set models carry (secret)."""
    current_id: pulumi.Output[str]
    """The current token's public id."""
    previous_id: pulumi.Output[str]
    """The previous token's public id (still valid until its slot rotates)."""

    def __init__(self, name: str, args: BootstrapTokensArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:azure:BootstrapTokens", name, None, opts)
        schedule = self.schedule = args.schedule
        child = pulumi.ResourceOptions(parent=self)
        self.slots: list[tuple[pulumi.Output[str], pulumi.Output[str]]] = []
        by_slot: dict[str, pulumi.Output[str]] = {}
        for period in schedule.slots:
            keepers = schedule.keepers(period.slot)
            token_id = random.RandomString(f"{name}-{period.slot}-id", length=6, upper=False, special=False,
                                           keepers=keepers, opts=child).result
            secret = random.RandomPassword(f"{name}-{period.slot}-secret", length=16, upper=False, special=False,
                                           keepers=keepers, opts=child).result
            self.slots.append((token_id, secret))
            by_slot[period.slot] = pulumi.Output.secret(pulumi.Output.concat(token_id, ".", secret))
        current_id = self.slots[0 if schedule.current.slot == "a" else 1][0]
        previous_id = self.slots[1 if schedule.current.slot == "a" else 0][0]
        self.current = by_slot[schedule.current.slot]
        self.current_id = current_id
        self.previous_id = previous_id
        self.register_outputs({"currentId": current_id, "previousId": previous_id})
