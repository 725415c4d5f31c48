"""preview.json in the shape of `pulumi preview --json`, and reading it back for `gpucluster check`."""

from __future__ import annotations

import heapq
import json
from pathlib import Path
from typing import Any

from components.errors import Problem, SpecError
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


MAX_PREVIEW_BYTES = 512 << 20
"""prod's preview is under 2 MB; a preview past half a gigabyte is not one this tool should load whole."""

# Step ops, from pulumi/pulumi pkg/resource/deploy/step.go (OpSame ... OpImportReplacement). Deletes and discards
# carry only `oldState` (pkg/backend/display/json.go, ShowPreviewDigest); the rest carry `newState`.
OLD_STATE_OPS = frozenset({"delete", "delete-replaced", "discard", "discard-replaced", "remove-pending-replace"})
NEW_STATE_OPS = frozenset({"same", "create", "update", "replace", "create-replacement", "read", "read-replacement",
                           "refresh", "import", "import-replacement"})


MAX_DEPTH = 100
"""Resource inputs nest a dozen levels; the policy run walks them recursively."""


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


def _step_problem(index: int, step: Any, seen: set[tuple[str, str]]) -> str | None:
    if not isinstance(step, dict):
        return f"steps[{index}] is not an object"
    op, urn = step.get("op"), step.get("urn")
    if not isinstance(op, str) or op not in OLD_STATE_OPS | NEW_STATE_OPS:
        return f"steps[{index}].op {op!r} is not a Pulumi step op ({', '.join(sorted(NEW_STATE_OPS | OLD_STATE_OPS))})"
    if not isinstance(urn, str) or not urn.startswith("urn:pulumi:"):
        return f"steps[{index}].urn must be a Pulumi URN string (urn:pulumi:...)"
    if (urn, op) in seen:
        return f"steps[{index}]: {op} of {urn} appears twice"
    seen.add((urn, op))
    key = "oldState" if op in OLD_STATE_OPS else "newState"
    state = step.get(key)
    if not isinstance(state, dict):
        return f"steps[{index}] ({op}) needs `{key}`, as `pulumi preview --json` writes it"
    if not isinstance(state.get("type"), str) or not state["type"]:
        return f"steps[{index}].{key}.type must be the resource type (a string)"
    if state.get("urn", urn) != urn:
        return f"steps[{index}].{key}.urn differs from the step's urn"
    if not isinstance(state.get("inputs", {}), dict):  # the root stack's state may have none
        return f"steps[{index}].{key}.inputs must be an object of the resource's inputs"
    return None


def read_preview(path: Path) -> dict[str, Any]:
    """A preview document from `gpucluster plan` or `pulumi preview --json`, checked enough for the policy run:
    every problem is a SpecError with one line, never a traceback."""
    where = str(path)
    if not path.is_file():
        raise SpecError.at(where, "no such file; run `gpucluster plan <stack>` first or pass a preview.json")
    if path.stat().st_size > MAX_PREVIEW_BYTES:
        raise SpecError.at(where, f"is larger than {MAX_PREVIEW_BYTES >> 20} MiB; not a preview this tool reads")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise SpecError.at(where, "is not UTF-8 JSON text; pass the file `pulumi preview --json` wrote") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise SpecError.at(where, f"not valid JSON at line {error.lineno}: {error.msg}") from None
    except RecursionError:  # the C decoder counts nesting against the recursion limit and raises, never crashes
        raise SpecError.at(where, "is nested too deeply to be a preview") from None
    if _too_deep(document):
        raise SpecError.at(where, f"is nested more than {MAX_DEPTH} levels deep; not a preview")
    steps = document.get("steps") if isinstance(document, dict) else None
    if not isinstance(steps, list):
        raise SpecError.at(where, "not a preview: expected an object with `steps`, as `pulumi preview --json` or "
                                  "`gpucluster plan` writes")
    if not steps:
        raise SpecError.at(where, "holds no resources to check: its `steps` list is empty; preview a stack that "
                                  "declares resources")
    seen: set[tuple[str, str]] = set()
    problems = [p for p in (_step_problem(i, step, seen) for i, step in enumerate(steps)) if p]
    if problems:
        raise SpecError([Problem(where, p) for p in problems[:20]])
    return document
