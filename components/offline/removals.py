"""Everything the plan renders, checked against what Kubernetes minors removed (components/catalog/removals.py).

Read from the rendered output itself: each manifest's `apiVersion` and kind, and the label, taint and flag names
anywhere in the manifests, the Helm releases' values and the boot documents (selectors, tolerations, kubeadm
nodeRegistration, kubelet and component flags). A use of something the stack's minor no longer has is a plan error;
what the next minor removes is listed (docs/operations.md, "Minor upgrade of a running cluster", step 1).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from gpucluster.catalog.removals import READ_THROUGH, REMOVED_APIS, REMOVED_NAMES, RemovedApi, RemovedName
from gpucluster.errors import Problem

KEY = "kubernetesRemovals"
"""Its place in summary.json."""


@dataclass(frozen=True)
class Use:
    removal: RemovedApi | RemovedName
    where: str

    @property
    def what(self) -> str:
        r = self.removal
        if isinstance(r, RemovedApi):
            return f"apiVersion {r.api_version}"
        return f"{r.what} {r.name}"


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def _name_pattern(name: str) -> re.Pattern[str]:
    """The name as a whole token: `--network-plugin` is not `--network-plugin-mtu`, a label key not a prefix."""
    return re.compile(rf"(?<![\w./-]){re.escape(name)}(?![\w./-])")


_PATTERNS = {r.name: _name_pattern(r.name) for r in REMOVED_NAMES}


def find_uses(objects: list[dict[str, Any]], releases: list[dict[str, Any]], boot: dict[str, str]) -> list[Use]:
    """Every rendered use of a removed API version, label, taint or flag, with where it is."""
    uses: list[Use] = []
    texts: list[tuple[str, str]] = []
    for o in objects:
        meta = o.get("metadata") or {}
        where = f"manifest {o.get('kind')} {meta.get('namespace', '')}/{meta.get('name', '')}".replace(" /", " ")
        uses += [Use(api, where) for api in REMOVED_APIS
                 if o.get("apiVersion") == api.api_version and o.get("kind") in api.kinds]
        texts.append((where, json.dumps(o, sort_keys=True)))
    texts += [(f"Helm release {r.get('release')} values", json.dumps(r.get("values"), sort_keys=True))
              for r in releases]
    texts += [(f"boot document {name}", text) for name, text in sorted(boot.items())]
    for where, text in texts:
        seen: set[str] = set()
        for removal in sorted(REMOVED_NAMES, key=lambda r: _minor(r.removed_in)):
            if removal.name not in seen and removal.name in text and _PATTERNS[removal.name].search(text):
                seen.add(removal.name)  # a label and a taint of one name: the earlier removal speaks for both
                uses.append(Use(removal, where))
    return uses


def removal_problems(uses: list[Use], kubernetes_version: str) -> list[Problem]:
    """Uses of what the stack's minor (or an earlier one) removed."""
    minor = _minor(kubernetes_version)
    return [Problem("cluster.kubernetesVersion",
                    f"{u.where} uses {u.what}, which Kubernetes {u.removal.removed_in} removed ({u.removal.source}); "
                    f"use {u.removal.use}")
            for u in uses if _minor(u.removal.removed_in) <= minor]


def removals_data(uses: list[Use], kubernetes_version: str) -> dict[str, Any]:
    """For summary.json: the next minor, what the catalogue records it removing, and which of those the plan uses."""
    major, minor = _minor(kubernetes_version)
    upcoming = f"{major}.{minor + 1}"
    recorded = [r for r in (*REMOVED_APIS, *REMOVED_NAMES) if r.removed_in == upcoming]
    return {
        "nextMinor": upcoming, "readThrough": READ_THROUGH,
        "recorded": len(recorded), "catalogueCovers": _minor(READ_THROUGH) >= (major, minor + 1),
        "uses": [{"what": u.what, "where": u.where, "source": u.removal.source, "use": u.removal.use}
                 for u in uses if u.removal.removed_in == upcoming],
    }


def removals_line(data: dict[str, Any]) -> str:
    nxt = data["nextMinor"]
    if data["uses"]:
        listed = "; ".join(f"{u['where']} uses {u['what']} (use {u['use']})" for u in data["uses"])
        return f"Before upgrading to Kubernetes {nxt}: {listed}"
    if not data["catalogueCovers"]:
        return (f"Before upgrading to Kubernetes {nxt}: its removals are not in the catalogue yet (read through "
                f"{data['readThrough']}); add them to components/catalog/removals.py from its changelog and the "
                "deprecated-API migration guide, then plan again")
    return f"Before upgrading to Kubernetes {nxt}: nothing rendered uses what it removes"
