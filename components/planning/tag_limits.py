"""Azure allows at most 50 tags a resource (learn.microsoft.com azure-resource-manager/management/tag-resources,
"Limitations"). A pool's scale sets carry the library's tags plus one autoscaler template tag per node label and
taint, so user labels and taints count against it; the plan refuses a pool ARM would refuse."""

from __future__ import annotations

from gpucluster.errors import Problem, pool_path
from gpucluster.planning.node_template import scale_set_tags, split_min
from gpucluster.planning.placement import PoolPlan
from gpucluster.spec import ClusterSpec
from gpucluster.spec.consumer_rules import MAX_TAGS


def tag_count_problems(spec: ClusterSpec, pools: tuple[PoolPlan, ...]) -> list[Problem]:
    names = [p.name for p in spec.pools]
    problems: list[Problem] = []
    for pool in pools:
        counts = [len(scale_set_tags(spec.name, pool, s, minimum, spec.location))
                  for s, minimum in zip(pool.scale_sets, split_min(pool), strict=True)]
        if counts and max(counts) > MAX_TAGS:
            problems.append(Problem(pool_path(names.index(pool.name), "labels"),
                                    f"the pool's scale sets would carry {max(counts)} tags (the library's own plus one "
                                    f"per node label and taint, which the autoscaler reads) and Azure allows "
                                    f"{MAX_TAGS} a resource; drop {max(counts) - MAX_TAGS} labels or taints"))
    return problems
