"""preview.json in the shape of `pulumi preview --json`, and reading it back for `gpucluster check`."""

from __future__ import annotations

import heapq
import json
from pathlib import Path
from typing import Any

from components.errors import SpecError
from components.offline.engine import ProgramRun, Registration


def _step(reg: Registration) -> dict[str, Any]:
    return {
        "op": "create",
        "urn": reg.urn,
        "newState": {
            "urn": reg.urn,
            "type": reg.type,
            "custom": reg.custom,
            "parent": reg.parent,
            "inputs": reg.inputs,
            "protect": reg.protect,
            "ignoreChanges": list(reg.ignore_changes),
            "dependencies": sorted(set(reg.dependencies)),
            "provider": reg.provider,
        },
    }


def stable_order(registrations: list[Registration]) -> list[Registration]:
    """Registrations in an order that does not depend on thread scheduling: parents and dependencies first
    (the order the engine would create them in), ties broken by URN. The SDK registers resources from
    several threads, so the order they arrive in varies from run to run."""
    by_urn = {r.urn: r for r in registrations}
    before = {r.urn: {u for u in (r.parent, *r.dependencies) if u in by_urn and u != r.urn} for r in registrations}
    after: dict[str, list[str]] = {urn: [] for urn in by_urn}
    for urn, needs in before.items():
        for need in needs:
            after[need].append(urn)
    waiting = {urn: len(needs) for urn, needs in before.items()}
    ready = [urn for urn, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    ordered: list[Registration] = []
    while ready:
        urn = heapq.heappop(ready)
        ordered.append(by_urn[urn])
        for follower in after[urn]:
            waiting[follower] -= 1
            if waiting[follower] == 0:
                heapq.heappush(ready, follower)
    if len(ordered) < len(by_urn):  # a cycle cannot be registered, but never drop a resource
        placed = {r.urn for r in ordered}
        ordered += sorted((r for r in registrations if r.urn not in placed), key=lambda r: r.urn)
    return ordered


def preview_document(run: ProgramRun) -> dict[str, Any]:
    return {
        "config": {"project": run.project, "stack": run.stack},
        "steps": [_step(r) for r in stable_order(run.registrations)],
        "outputs": run.outputs,
        "changeSummary": {"create": len(run.registrations)},
        # Not in `pulumi preview --json`: digests of the masked secret inputs (boot documents), so that
        # `gpucluster diff` can tell which boot documents a change touches without showing them.
        "secretDigests": {r.urn: dict(r.secret_digests) for r in run.registrations if r.secret_digests},
    }


def write_preview(document: dict[str, Any], path: Path) -> None:
    # Sorted keys: recorded inputs come out of protobuf maps in no guaranteed order.
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def read_preview(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise SpecError.at(str(path), "no such file; run `gpucluster plan <stack>` first or pass a preview.json")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise SpecError.at(str(path), f"not valid JSON at line {error.lineno}: {error.msg}") from None
    steps = document.get("steps") if isinstance(document, dict) else None
    # delete steps carry only `oldState` (pulumi's ShowPreviewDigest); preview_steps reads each kind
    if not isinstance(steps, list) or not all(isinstance(s, dict) and (isinstance(s.get("newState"), dict)
                                                                       or isinstance(s.get("oldState"), dict))
                                              for s in steps):
        raise SpecError.at(str(path), "not a preview: expected `steps` with a `newState` or `oldState` each, "
                                      "as `pulumi preview --json` or `gpucluster plan` writes")
    return document
