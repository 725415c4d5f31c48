"""Which machines a change needs re-imaged, and the head plan's rollout waves that do it (components/planning/
rollout.py; docs/operations.md, "Rolling a node image or boot change").

A scale set or VM needs its instances re-imaged when its node image version or its boot document changes (a
Kubernetes patch and a kubelet config change reach machines through both): its upgradePolicy is Manual, so Azure
applies the new model to new and re-imaged instances only. The head side's summary.json `rollout` is read
defensively (a summary is a file a reviewer may be handed): a wave that is not shaped as the planner writes it is
left out, and a machine no wave names is listed as such.
"""

from __future__ import annotations

import math
from typing import Any

from gpucluster.diff.sides import Side
from gpucluster.planning.node_images import API_SCALE_SET
from gpucluster.vocabulary import POOL_TAG, ROLE_TAG


def _tags(state: dict[str, Any]) -> dict[str, Any]:
    tags = (state.get("inputs") or {}).get("tags")
    return tags if isinstance(tags, dict) else {}


def machine_names(head: Side) -> dict[str, str]:
    """Resource name -> the name the rollout's waves use: a node scale set's own, `apiserver` for the API servers'
    scale set (tagged with its role), an etcd member's VM name."""
    names: dict[str, str] = {}
    for urn, state in head.resources.items():
        name, tags = urn.rsplit("::", 1)[-1], _tags(state)
        if tags.get(ROLE_TAG) == "apiserver" and "VirtualMachineScaleSet" in str(state.get("type", "")):
            names[name] = API_SCALE_SET
        elif POOL_TAG in tags or str(tags.get(ROLE_TAG, "")).startswith("etcd"):
            names[name] = name
    return names


def _waves(head: Side) -> tuple[list[dict[str, Any]], dict[str, Any]] | None:
    rollout = head.summary.get("rollout") if head.summary else None
    if not isinstance(rollout, dict) or not isinstance(rollout.get("waves"), list):
        return None
    waves = [w for w in rollout["waves"] if isinstance(w, dict) and isinstance(w.get("scaleSets"), list)
             and all(isinstance(s, str) for s in w["scaleSets"])]
    return waves, rollout


def _number(value: Any) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else 0.0


def rollout_delta(head: Side, reasons: dict[str, list[str]]) -> dict[str, Any] | None:
    """`reasons`: resource name -> why its instances need re-imaging. None when no machine does."""
    if not reasons:
        return None
    names = machine_names(head)
    touched: dict[str, list[str]] = {}
    for resource, why in reasons.items():
        touched.setdefault(names.get(resource, resource), []).extend(why)
    read = _waves(head)
    if read is None:
        return {"machines": {m: sorted(set(w)) for m, w in sorted(touched.items())}, "waves": [],
                "unplanned": sorted(touched), "minutes": 0, "minutesWithDrain": 0, "gpuHours": 0.0,
                "note": "the head side carries no rollout (not a `gpucluster plan` folder of this version)"}
    waves, _ = read
    chosen = [w for w in waves if set(w["scaleSets"]) & set(touched)]
    planned = {s for w in chosen for s in w["scaleSets"]}
    minutes = sum(_number(w.get("minutes")) for w in chosen)
    return {"machines": {m: sorted(set(w)) for m, w in sorted(touched.items())},
            "waves": chosen, "unplanned": sorted(set(touched) - planned),
            "minutes": int(minutes), "minutesWithDrain": int(minutes + sum(_number(w.get("drainMinutes"))
                                                                          for w in chosen)),
            "gpuHours": round(sum(_number(w.get("gpuHours")) for w in chosen), 1), "note": None}


def rollout_lines(rollout: dict[str, Any] | None) -> list[str]:
    if not rollout:
        return []
    lines = [f"rollout: {len(rollout['machines'])} scale sets or VMs need their instances re-imaged, in "
             f"{len(rollout['waves'])} waves, {rollout['minutes'] / 60:.1f} h ({rollout['minutesWithDrain'] / 60:.1f} h "
             f"with the drain deadlines), {rollout['gpuHours']:,.0f} GPU-hours out of service (docs/operations.md)"]
    for w in rollout["waves"]:
        what = (f"{w['scaleSets'][0]} instance {w['instance']}" if isinstance(w.get("instance"), int)
                else ", ".join(w["scaleSets"]))
        lines.append(f"  wave {w.get('index')}: {w.get('pool')} zone {w.get('zone') or 'any'}: {what}")
    if rollout["unplanned"]:
        lines.append(f"  in no wave of the head plan: {', '.join(rollout['unplanned'])}")
    if rollout["note"]:
        lines.append(f"  note: {rollout['note']}")
    return lines
