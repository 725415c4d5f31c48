"""What the agents on every node ask of the API servers, against the seats their priority level has.

Pure. Each agent's steady requests (per pod per minute, from its source) times the nodes it runs on gives
requests per second; at the latency SLO's bound a request holds its seat up to a second, so that many seats
(components/catalog/flowcontrol.py SLO_SOURCE). The level's seats per API server are its share of the server's
concurrency limit, as APF computes it (APF_SEATS_SOURCE), on the API servers left after losing the zone with
the most of them. Agents over the level's seats are a plan error naming each agent's load.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpucluster.catalog.flowcontrol import APF_SEATS_SOURCE, DEFAULT_SHARES, SLO_LATENCY_S, SLO_SOURCE
from gpucluster.errors import Problem, SpecError


@dataclass(frozen=True)
class AgentLoad:
    name: str
    namespace: str
    service_account: str
    nodes: int
    calls_per_minute: float | None
    source: str

    @property
    def requests_per_second(self) -> float | None:
        return None if self.calls_per_minute is None else self.calls_per_minute * self.nodes / 60

    @property
    def seats(self) -> float | None:
        rps = self.requests_per_second
        return None if rps is None else rps * SLO_LATENCY_S


@dataclass(frozen=True)
class AgentLoadPlan:
    level: str
    shares: int
    server_concurrency: int
    seats_per_server: int
    servers: int
    agents: tuple[AgentLoad, ...]

    @property
    def seats(self) -> int:
        return self.seats_per_server * self.servers

    @property
    def seats_needed(self) -> float:
        return sum(a.seats or 0.0 for a in self.agents)

    @property
    def unmodelled(self) -> tuple[AgentLoad, ...]:
        return tuple(a for a in self.agents if a.calls_per_minute is None)


def nominal_seats(server_concurrency: int, shares: int, all_shares: int) -> int:
    """NominalCL(i) = ceil(ServerCL x NCS(i) / sum of NCS), as apf_controller.go computes it."""
    return math.ceil(server_concurrency * shares / all_shares)


def plan_agent_load(level: str, shares: int, server_concurrency: int, servers: int,
                    agents: tuple[AgentLoad, ...]) -> AgentLoadPlan:
    """`server_concurrency`: one API server's --max-requests-inflight plus --max-mutating-requests-inflight;
    `servers`: the API servers left after losing the zone with the most."""
    all_shares = sum(DEFAULT_SHARES.values()) + shares
    plan = AgentLoadPlan(level, shares, server_concurrency, nominal_seats(server_concurrency, shares, all_shares),
                         servers, agents)
    if plan.seats_needed > plan.seats:
        top = sorted((a for a in agents if a.seats), key=lambda a: -(a.seats or 0))
        detail = "; ".join(f"{a.namespace}/{a.name}: {a.calls_per_minute:g}/min x {a.nodes:,} nodes = "
                           f"{a.requests_per_second:,.0f} req/s ({a.source})" for a in top)
        raise SpecError([Problem("cluster.inCluster", (
            f"the node agents need {plan.seats_needed:,.0f} seats of API Priority and Fairness level {level} and it "
            f"has {plan.seats:,} ({plan.seats_per_server} on each of {servers} API servers left after losing a zone; "
            f"{APF_SEATS_SOURCE}; a request holds its seat up to {SLO_LATENCY_S:g} s, {SLO_SOURCE}): {detail}. Add "
            "API servers (cluster.controlPlane.apiServers.count), or make the agents ask less"))])
    return plan
