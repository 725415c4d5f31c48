"""preview.json in the shape of `pulumi preview --json`, and reading it back for `gpucluster check`."""

from __future__ import annotations

import heapq
import json
from pathlib import Path
from typing import Any

from gpucluster.errors import SpecError
from gpucluster.input_files import MIB, load_json, read_bounded
from gpucluster.offline.engine import ProgramRun, Registration
from gpucluster.offline.preview_shape import preview_problems


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


MAX_PREVIEW_BYTES = 32 * MIB
"""The largest stack planned (prod x4 in bench/, 30,000 nodes) writes a 1.5 MB preview, prod 0.7 MB. A real
`pulumi preview --json --show-sames` carries both old and new state with outputs: an estimated 5x, 7.5 MB for x4
(not measured here: there is no Pulumi CLI offline). 32 MiB is over 4x that and bounds what reading costs
(docs/operations.md, "Input bounds")."""
MAX_VALUES = 1_000_000
"""Objects, lists and values, counted before parsing as the bytes `{`, `[` and `,` (an upper bound: they can sit
in strings too). prod's preview has 12,175 such bytes; its real preview an estimated 70,000. Parsed JSON costs up to
30 bytes of memory per byte of text when it is all small containers (`[[],[],...]`); this count keeps a document
at the byte cap to a few hundred megabytes."""
MAX_DEPTH = 64
"""Resource inputs nest about a dozen levels (prod's preview: 15 in all)."""


def _too_deep(value: Any) -> bool:
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return False


def read_preview(path: Path) -> dict[str, Any]:
    """A preview document from `gpucluster plan` or `pulumi preview --json`, its shape checked at every field the
    tool reads (components/offline/preview_shape.py): every problem is a SpecError line naming the file and the
    JSON path, never a traceback. Reading costs at most MAX_PREVIEW_BYTES and MAX_VALUES, whatever the file."""
    where = str(path)
    what = "preview (`pulumi preview --json` or `gpucluster plan` output)"
    data = read_bounded(path, MAX_PREVIEW_BYTES, what)
    values = data.count(b"{") + data.count(b"[") + data.count(b",")
    if values > MAX_VALUES:
        raise SpecError.at(where, f"holds more than {MAX_VALUES:,} JSON values ({values:,} of `{{`, `[` and `,`); not a "
                                  "preview this tool reads (docs/operations.md, \"Input bounds\")")
    document = load_json(data, where, what)
    del data
    if _too_deep(document):
        raise SpecError.at(where, f"is nested more than {MAX_DEPTH} levels deep; not a preview")
    problems = preview_problems(document, where)
    if problems:
        raise SpecError(problems)
    return document
