"""The one-domain-at-a-time rule (policies/rules/replacements.py) over a saved real `pulumi preview --json`, whose
replace steps carry the old and the new state: what `gpucluster check` adds to the pack, which sees new inputs only."""

from __future__ import annotations

from typing import Any

from gpucluster.offline.policy_runner import Violation
from gpucluster.offline.preview_steps import replaced_states
from gpucluster.policies.rules.props import SCALE_SET, resource_kind
from gpucluster.policies.rules.replacements import Replaced, judge
from gpucluster.results import Severity

DESCRIPTION = "At most one InfiniBand domain of a pool is replaced by one change, unless the stack acknowledges each"


def _get(inputs: dict[str, Any], path: str) -> Any:
    current: Any = inputs
    for key in path.split("."):
        current = current.get(key) if isinstance(current, dict) else None
    return current


def replaced_domain_violations(doc: dict[str, Any], acknowledged: list[str] | None) -> list[Violation]:
    replaced = []
    for old, new, reasons in replaced_states(doc):
        if resource_kind(str(old.get("type")), old["inputs"]) != SCALE_SET:
            continue
        tags = old["inputs"].get("tags")
        replaced.append(Replaced(str(old["urn"]).rsplit("::", 1)[-1], tags if isinstance(tags, dict) else {},
                                 _get(old["inputs"], "sku.name"), _get(new["inputs"], "sku.name"),
                                 _get(old["inputs"], "sku.capacity"),
                                 "replaced by " + (", ".join(reasons) if reasons else "the provider's diff")))
    urns = {str(old["urn"]).rsplit("::", 1)[-1]: str(old["urn"]) for old, _, _ in replaced_states(doc)}
    return [Violation(f.source, DESCRIPTION, "high", Severity(f.severity), urns.get(f.path, ""), f.message, f.fix)
            for f in judge(replaced, acknowledged)]
