"""The bootstrap tokens' schedule: which token new machines carry, when it was issued, when it expires.

Pure. Time is cut into rotation periods of `rotationDays` UTC days from 1970-01-01; period `p` starts at
`issued(p)` and its token expires `overlapDays` after the next period starts, so the token of the period
before stays valid for the overlap once machines are given the new one.

Two token slots, `a` for even periods and `b` for odd ones, each a pulumi-random pair whose `keepers` name the
latest period of its parity (pulumi-random holds a value until its inputs change and replaces a resource whose
keepers change: Pulumi registry, Random provider v4.16, "Resource Keepers"). Moving into period p+1 therefore
replaces only the slot of p+1's parity (the token of p-1, expired or about to) and leaves the slot holding p's
token untouched: the previous token keeps its value and its Secret, the current one is new. The period is computed
from the date `pulumi up` runs, so the stack rotates without anyone editing it. pulumiverse-time's `Rotating`
(PyPI pulumiverse-time 0.1.1) is not used: it holds one timestamp that is replaced at rotation, so the overlap
would still need two slots, and its dates exist only in state, where the offline plan cannot show them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from gpucluster.spec import BootstrapTokenSpec

EPOCH = date(1970, 1, 1)
NODE_GROUP = "system:bootstrappers:kubeadm:default-node-token"
"""The extra group kubeadm's join path is authorised for (kubeadm's RBAC binds this group, `NodeBootstrapTokenAuthGroup`
in kubernetes `cmd/kubeadm/app/constants/constants.go`)."""


@dataclass(frozen=True)
class TokenPeriod:
    slot: str
    """`a` (even periods) or `b` (odd): the pulumi-random resources that hold this period's token."""
    period: int
    issued: datetime
    expires: datetime

    @property
    def expiration(self) -> str:
        """The Secret's `expiration`: RFC 3339 in UTC, as kubeadm writes it (`time.RFC3339`)."""
        return self.expires.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class TokenSchedule:
    rotation_days: int
    overlap_days: int
    generation: int
    current: TokenPeriod
    """The token new scale-set models carry."""
    previous: TokenPeriod
    """The token models carried before the last rotation, valid until its own expiry."""

    @property
    def rotates(self) -> datetime:
        """When the next period starts: the first `pulumi up` after it gives new models a new token."""
        return self.current.expires - timedelta(days=self.overlap_days)

    def keepers(self, slot: str) -> dict[str, str]:
        """The slot's pulumi-random keepers: a new value when its period or the generation changes."""
        held = self.current if self.current.slot == slot else self.previous
        return {"generation": str(self.generation), "period": str(held.period)}

    @property
    def slots(self) -> tuple[TokenPeriod, TokenPeriod]:
        """Both tokens in slot order (a, b)."""
        return (self.current, self.previous) if self.current.slot == "a" else (self.previous, self.current)


def _start(period: int, days: int) -> datetime:
    start = EPOCH + timedelta(days=period * days)
    return datetime(start.year, start.month, start.day, tzinfo=UTC)


def _period(period: int, spec: BootstrapTokenSpec) -> TokenPeriod:
    return TokenPeriod("a" if period % 2 == 0 else "b", period, _start(period, spec.rotation_days),
                       _start(period + 1, spec.rotation_days) + timedelta(days=spec.overlap_days))


def plan_bootstrap_tokens(spec: BootstrapTokenSpec, today: date) -> TokenSchedule:
    period = (today - EPOCH).days // spec.rotation_days
    return TokenSchedule(spec.rotation_days, spec.overlap_days, spec.generation, _period(period, spec),
                         _period(period - 1, spec))
