"""preview.json in the shape of `pulumi preview --json`, and reading it back for `gpucluster check`."""

from __future__ import annotations

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
            "dependencies": list(reg.dependencies),
            "provider": reg.provider,
        },
    }


def preview_document(run: ProgramRun) -> dict[str, Any]:
    return {
        "config": {"project": run.project, "stack": run.stack},
        "steps": [_step(r) for r in run.registrations],
        "outputs": run.outputs,
        "changeSummary": {"create": len(run.registrations)},
    }


def write_preview(document: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(document, indent=2, sort_keys=False) + "\n", encoding="utf-8")


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
    if key == "newState" and not isinstance(state.get("inputs"), dict):
        return f"steps[{index}].newState.inputs must be an object of the resource's inputs"
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
        raise SpecError.at(where, "has no steps, so there is nothing to check; preview a stack that declares "
                                  "resources")
    seen: set[tuple[str, str]] = set()
    problems = [p for p in (_step_problem(i, step, seen) for i, step in enumerate(steps)) if p]
    if problems:
        raise SpecError([Problem(where, p) for p in problems[:20]])
    return document
