"""preview.json in the shape of `pulumi preview --json`, and reading it back for `gpucluster check`."""

from __future__ import annotations

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


def read_preview(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise SpecError.at(str(path), "no such file; run `gpucluster plan <stack>` first or pass a preview.json")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise SpecError.at(str(path), f"not valid JSON at line {error.lineno}: {error.msg}") from None
    steps = document.get("steps") if isinstance(document, dict) else None
    if not isinstance(steps, list) or not all(isinstance(s, dict) and isinstance(s.get("newState"), dict)
                                              for s in steps):
        raise SpecError.at(str(path), "not a preview: expected `steps` with a `newState` each, "
                                      "as `pulumi preview --json` or `gpucluster plan` writes")
    return document
