"""ClusterQueues Kueue's webhook accepts: kubernetes-sigs/kueue v0.19.2 pkg/webhooks/clusterqueue_webhook.go.

validateLendingLimit refuses a flavor's lendingLimit above its nominalQuota ("must be less than or equal to the
nominalQuota"), per flavor and resource. The stack gives team-wide figures that the planner splits over the
team's flavors; the split of the limit must stay within the split of the quota on every flavor, not just in
total (largest remainder is not monotone: weights 1, 3, 3 split 3 as 1, 1, 1 and 4 as 0, 2, 2).
"""

from __future__ import annotations

import itertools
from typing import Any

from gpucluster.kubernetes.objects.kueue import kueue_objects
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.planning.scheduling import split_proportionally, split_within
from tests.support.stacks import spec_of, stack_spec


def _quantity(value: int | str) -> int:
    return int(str(value).removesuffix("Gi"))


def _webhook_refusals(objects: list[dict[str, Any]]) -> list[str]:
    """validateLendingLimit and validateLimit as clusterqueue_webhook.go applies them to each flavor resource."""
    found = []
    for queue in (o for o in objects if o["kind"] == "ClusterQueue"):
        for group in queue["spec"]["resourceGroups"]:
            for flavor in group["flavors"]:
                for row in flavor["resources"]:
                    where = f"{queue['metadata']['name']}/{flavor['name']}/{row['name']}"
                    if "lendingLimit" in row and _quantity(row["lendingLimit"]) > _quantity(row["nominalQuota"]):
                        found.append(f"{where}: lendingLimit must be less than or equal to the nominalQuota")
                    if ("lendingLimit" in row or "borrowingLimit" in row) and not queue["spec"].get("cohortName"):
                        found.append(f"{where}: must be nil when cohort is empty")
    return found


def test_a_lending_limit_within_the_quota_stays_within_it_on_every_flavor() -> None:
    """Three GPU pools of 3, 3 and 1 GPUs: a team quota of 4 GPUs splits 2, 2, 0; a lending limit of 3 would
    split 1, 1, 1, lending a GPU the team holds no quota for on the third pool."""
    raw = stack_spec("dev").model_dump(by_alias=True, mode="json")
    t4 = next(p for p in raw["pools"] if p["name"] == "t4")
    raw["pools"] = [p for p in raw["pools"] if p["name"] != "t4"]
    raw["pools"][1:1] = [{**t4, "count": 3}, {**t4, "name": "t4b", "count": 3}]
    raw["balloons"] = []
    raw["teams"] = [{"name": "research", "quota": {"gpus": 4}, "lendingLimit": {"gpus": 3},
                     "pools": ["t4", "t4b", "confidential"]}]
    plan = plan_cluster(spec_of(raw))
    objects = kueue_objects(plan.scheduling)
    assert _webhook_refusals(objects) == []
    lent = {f.flavor: f.lending_limit.gpus for f in plan.scheduling.teams[0].flavors if f.lending_limit}
    assert sum(lent.values()) == 3  # the team still lends what it said


def test_split_within_never_passes_a_cap_and_keeps_the_total() -> None:
    for weights in itertools.product(range(1, 6), repeat=3):
        for nominal in range(0, 16):
            caps = split_proportionally(nominal, list(weights))
            for lend in range(0, nominal + 1):
                parts = split_within(lend, list(weights), caps)
                assert sum(parts) == lend and all(p <= c for p, c in zip(parts, caps, strict=True)), \
                    (weights, nominal, lend, parts, caps)


def test_the_shipped_stacks_queues_pass_the_webhook_rules() -> None:
    for name in ("dev", "prod"):
        assert _webhook_refusals(kueue_objects(plan_cluster(stack_spec(name)).scheduling)) == []
