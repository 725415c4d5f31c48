"""Resource states from a preview document: `gpucluster plan`'s preview.json or a real `pulumi preview --json`.

The real document is pulumi/pulumi `pkg/backend/display/json.go` (ShowPreviewDigest): one step per shown
resource with `op`, `urn` and, serialised by `pkg/resource/stack` (SerializeResource), `oldState` and/or
`newState`:

- `create`, `read`, `import`: `newState` only; `delete`, `delete-replaced`, `discard`: `oldState` only;
  `same`, `update`, `replace`, `create-replacement`, `refresh`: both (a replacement shows one URN in up to
  three steps). `same` steps appear only with `--show-sames`.
- Secret values are masked as the string `"[secret]"` (massagePropertyValue); a serialised secret that
  escaped masking is the envelope `{"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", ...}`
  (sdk/go/common/resource/properties.go: SigKey, SecretSig), treated as masked here.
- Values the preview cannot know are the string `"04da6b54-80e4-46f7-96ec-b56ff0331ba9"`
  (resource.UnknownStringValue, sdk/go/common/resource/plugin/rpc.go); they stay as they are, and the
  policy runner's proxy reports rules that read them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from components.errors import SpecError
from components.offline.engine import RESOURCE_SIG, SECRET_MARK, SECRET_SIG, SIG_KEY

GONE_OPS = frozenset({"delete", "delete-replaced", "discard", "remove-pending-replace"})
"""Steps after which the resource no longer exists: not part of the stack the policies judge."""


def _unwrap(value: Any) -> Any:
    if isinstance(value, dict):
        signature = value.get(SIG_KEY)
        if signature == SECRET_SIG:
            return SECRET_MARK
        if signature == RESOURCE_SIG:
            return value.get("urn", "")
        return {k: _unwrap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap(v) for v in value]
    return value


def _state(step: dict[str, Any], key: str) -> dict[str, Any] | None:
    state = step.get(key)
    if not isinstance(state, dict):
        return None
    urn = state.get("urn") or step.get("urn")
    if not isinstance(urn, str) or not isinstance(state.get("type"), str):
        return None
    inputs = state.get("inputs")
    return {**state, "urn": urn, "inputs": _unwrap(inputs) if isinstance(inputs, dict) else {}}


def steps_from_preview(doc: dict[str, Any], where: str = "preview") -> list[dict[str, Any]]:
    """The state of every resource the stack holds after the previewed operation, one per URN in document
    order: `newState` of each step that leaves the resource in place, none for deletes."""
    steps = doc.get("steps")
    if not isinstance(steps, list):
        raise SpecError.at(where, "not a preview: expected `steps`, as `pulumi preview --json` or `gpucluster plan` "
                                  "writes")
    states: dict[str, dict[str, Any]] = {}
    gone: set[str] = set()
    for step in steps:
        if not isinstance(step, dict):
            continue
        op = step.get("op")
        if op in GONE_OPS:
            urn = step.get("urn") or (step.get("oldState") or {}).get("urn")
            if isinstance(urn, str) and urn not in states:
                gone.add(urn)
            continue
        state = _state(step, "newState")
        if state is not None:
            states[state["urn"]] = state  # a replacement's later step carries the same new state
            gone.discard(state["urn"])
    if not any(s.get("custom") for s in states.values()):
        raise SpecError.at(where, "the preview holds no resources to check (every step deletes, or there are no "
                                  "steps); run `pulumi preview --json --show-sames` on the stack, or "
                                  "`gpucluster plan <stack>`")
    return list(states.values())


def deleted_states(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The `oldState` of each resource the preview deletes without putting a new one in its place."""
    kept = {s.get("urn") for s in doc.get("steps") or [] if isinstance(s, dict) and s.get("op") not in GONE_OPS}
    found = [_state(s, "oldState") for s in doc.get("steps") or []
             if isinstance(s, dict) and s.get("op") in GONE_OPS]
    return [s for s in found if s is not None and s["urn"] not in kept]


def shows_sames(doc: dict[str, Any]) -> bool:
    """Whether the document lists unchanged resources too; without them stack rules see only what changes."""
    ops = {s.get("op") for s in doc.get("steps") or [] if isinstance(s, dict)}
    return "same" in ops or ops <= {"create"}


def stack_name(doc: dict[str, Any]) -> str | None:
    """The stack a preview is of: `config.stack` in gpucluster's documents, else from a URN
    (`urn:pulumi:<stack>::<project>::<type>::<name>`)."""
    config = doc.get("config")
    if isinstance(config, dict) and isinstance(config.get("stack"), str):
        return config["stack"]
    for step in doc.get("steps") or []:
        urn = step.get("urn") if isinstance(step, dict) else None
        if isinstance(urn, str) and urn.startswith("urn:pulumi:") and "::" in urn:
            return urn.removeprefix("urn:pulumi:").split("::", 1)[0]
    return None


def stack_policy_config(doc: dict[str, Any], root: Path) -> Path | None:
    """policies/config/<stack>.json for the preview's stack, as `gpucluster plan` uses it."""
    name = stack_name(doc)
    return root / "policies" / "config" / f"{name}.json" if name else None
