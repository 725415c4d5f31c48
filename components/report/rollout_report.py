"""The rollout as data (summary.json `rollout`), as the terminal's short block and as report.html's section
(components/planning/rollout.py; docs/operations.md, "Rolling a node image or boot change")."""

from __future__ import annotations

from html import escape
from typing import Any

from rich.console import Console

from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.planning.fence import FENCE
from gpucluster.planning.rollout import Wave
from gpucluster.report.html_table import n, table

Data = dict[str, Any]


def _wave(wave: Wave) -> Data:
    return {"index": wave.index, "kind": wave.kind, "pool": wave.pool, "zone": wave.zone,
            "scaleSets": list(wave.scale_sets), "instance": wave.instance, "nodes": wave.nodes, "gpus": wave.gpus,
            "minutes": wave.minutes, "drainMinutes": wave.drain_minutes, "gpuHours": round(wave.gpu_hours, 1),
            "quotaShortGpus": wave.quota_short_gpus, "quotaShortVcpus": wave.quota_short_vcpus,
            "quorumIfZoneLost": wave.quorum_if_zone_lost}


def rollout_data(plan: ClusterPlan) -> Data:
    rollout = plan.rollout
    s = rollout.settings
    return {
        "settings": {"gpuDomainsPerWave": s.gpu_domains_per_wave, "batchPercent": s.batch_percent,
                     "reimageMinutes": s.reimage_minutes, "bootMinutes": s.boot_minutes,
                     "preflightMinutes": s.preflight_minutes, "drainDeadlineMinutes": s.drain_deadline_minutes},
        "fence": {"label": FENCE.label, "open": FENCE.open, "fenced": FENCE.fenced},
        "minutes": rollout.minutes, "minutesWithDrain": rollout.minutes_with_drain,
        "gpuHours": round(rollout.gpu_hours, 1),
        "waves": [_wave(w) for w in rollout.waves],
    }


def _hours(minutes: int) -> str:
    return f"{minutes / 60:.1f} h"


def whole_set_text(rollout: Data) -> str:
    """One line naming the largest CPU or system wave that is a whole scale set above the pool's batch share."""
    pools: dict[str, int] = {}
    for w in rollout["waves"]:
        if w["kind"] == "pool":
            pools[w["pool"]] = pools.get(w["pool"], 0) + w["nodes"]
    share = rollout["settings"]["batchPercent"]
    over = [w for w in rollout["waves"] if w["kind"] == "pool" and not w["gpus"] and len(w["scaleSets"]) == 1
            and w["nodes"] * 100 > pools[w["pool"]] * share]
    if not over:
        return ""
    w = max(over, key=lambda w: w["nodes"])
    return (f"A scale set is the smallest wave: where one holds more than {share}% of its pool, its wave takes it "
            f"whole (pool {w['pool']}: {w['nodes']:,} of {pools[w['pool']]:,} nodes in wave {w['index']}).")


def quota_short_text(rollout: Data) -> str | None:
    """One line naming the pools whose waves leave less in service than the teams' nominal quota."""
    short: dict[str, int] = {}
    for w in rollout["waves"]:
        if w["quotaShortGpus"] or w["quotaShortVcpus"]:
            short[w["pool"]] = max(short.get(w["pool"], 0), w["quotaShortGpus"])
    if not short:
        return None
    pools = ", ".join(f"{p} (up to {g:,} GPUs)" if g else p for p, g in short.items())
    return (f"during their waves, pools {pools} keep less in service than the teams' nominal quota on them (one "
            "domain or scale set is the smallest wave; docs/operations.md)")


def print_rollout(console: Console, data: Data) -> None:
    rollout = data.get("rollout")
    if not rollout:
        return
    waves = rollout["waves"]
    console.print(f"[bold]Rollout[/bold]: {len(waves)} waves, {_hours(rollout['minutes'])} "
                  f"({_hours(rollout['minutesWithDrain'])} with every GPU wave's drain deadline), "
                  f"{rollout['gpuHours']:,.0f} GPU-hours out of service", soft_wrap=True)
    short = quota_short_text(rollout)
    if short:
        console.print(f"[yellow]  {short}[/yellow]", soft_wrap=True)


def _scale_sets(w: Data) -> str:
    if w["instance"] is not None:
        return f"{w['scaleSets'][0]} instance {w['instance']}"
    return ", ".join(w["scaleSets"])


def _quorum(w: Data) -> str:
    if w["quorumIfZoneLost"] is None:
        return "-"
    return "holds" if w["quorumIfZoneLost"] else "lost"


def rollout_section(data: Data) -> list[str]:
    rollout = data.get("rollout")
    if not rollout:
        return []
    s = rollout["settings"]
    out = [f"<h2>Rollout: {len(rollout['waves'])} waves, {_hours(rollout['minutes'])}, "
           f"{rollout['gpuHours']:,.0f} GPU-hours out of service</h2>",
           f"<p>One wave after another: control plane one member at a time, then each pool zone by zone, at most "
           f"{s['gpuDomainsPerWave']} InfiniBand domain or rack of a GPU pool and {s['batchPercent']}% of a CPU or "
           f"system pool per wave. A wave: reimage {s['reimageMinutes']} min + boot {s['bootMinutes']} min (+ GPU "
           f"preflight {s['preflightMinutes']} min); a GPU wave first waits for its workloads, at most "
           f"{s['drainDeadlineMinutes']} min after the checkpoint annotation ({_hours(rollout['minutesWithDrain'])} "
           "in all at worst). Estimates from cluster.rollout.</p>"]
    out.append("<p>The order only: the rollout controller re-images, wave by wave, the instances Azure reports behind "
               "their scale set's model (<code>latestModelApplied</code>), and nothing else; a wave with none behind is "
               "passed over.</p>")
    whole = whole_set_text(rollout)
    if whole:
        out.append(f"<p>{escape(whole)}</p>")
    short = quota_short_text(rollout)
    if short:
        out.append(f'<p class="warn">{escape(short)}</p>')
    out.append(table(["wave", "pool or role", "zone", "scale sets", "nodes", "GPUs", "min", "GPU-hours",
                      "short of nominal quota (GPUs / vCPUs)", "etcd quorum if a zone is lost"],
                     [[str(w["index"]), escape(w["pool"]), escape(w["zone"] or "any"), escape(_scale_sets(w)),
                       n(w["nodes"]), n(w["gpus"]), str(w["minutes"]), f"{w['gpuHours']:,.1f}",
                       f"{n(w['quotaShortGpus'])} / {n(w['quotaShortVcpus'])}", _quorum(w)]
                      for w in rollout["waves"]], left=4))
    return out
