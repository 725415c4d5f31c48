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

from dataclasses import dataclass
from typing import Any

from gpucluster.errors import SpecError
from gpucluster.offline.engine import RESOURCE_SIG, SECRET_MARK, SECRET_SIG, SIG_KEY
from gpucluster.spec.stack_names import stack_name_problem

GONE_OPS = frozenset({"delete", "delete-replaced", "discard", "remove-pending-replace"})
"""Steps after which the resource no longer exists: not part of the stack the policies judge."""


def _unwrap(value: Any) -> Any:
    """`value` with serialised secrets masked and resource references as their URN. Copy on write: a subtree
    without envelopes is returned as it is, so a large document is not copied (the reader bounded its depth)."""
    if isinstance(value, dict):
        signature = value.get(SIG_KEY)
        if signature == SECRET_SIG:
            return SECRET_MARK
        if signature == RESOURCE_SIG:
            return value.get("urn", "")
        changed = {k: new for k, v in value.items() if (new := _unwrap(v)) is not v}
        return {**value, **changed} if changed else value
    if isinstance(value, list):
        items = [_unwrap(v) for v in value]
        return items if any(new is not old for new, old in zip(items, value, strict=True)) else value
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


def urn_stacks(doc: dict[str, Any]) -> set[str]:
    """The stacks the steps' URNs name (`urn:pulumi:<stack>::<project>::<type>::<name>`)."""
    found: set[str] = set()
    for step in doc.get("steps") or []:
        urn = step.get("urn") if isinstance(step, dict) else None
        if isinstance(urn, str) and urn.startswith("urn:pulumi:") and "::" in urn:
            found.add(urn.removeprefix("urn:pulumi:").split("::", 1)[0])
    return found


def stack_name(doc: dict[str, Any]) -> str | None:
    """The stack a preview is of, from its URNs; None when they name none or several."""
    stacks = urn_stacks(doc)
    return next(iter(stacks)) if len(stacks) == 1 else None


def preview_stack(doc: dict[str, Any], where: str, named: str | None) -> str:
    """The one stack a preview's resources belong to, checked against what the document says of itself
    (`config.stack` in gpucluster's previews) and against the stack the user named: a mismatch is an error, never
    a reason to judge the preview by another stack's policy config."""
    stacks = urn_stacks(doc)
    if len(stacks) != 1:
        shown = ", ".join(sorted(repr(s[:60]) for s in stacks)[:5])
        raise SpecError.at(where, f"its URNs name {len(stacks)} stacks ({shown}); a preview is of one stack")
    (stack,) = stacks
    if (problem := stack_name_problem(stack)) is not None:
        raise SpecError.at(where, f"the stack in its URNs {stack[:60]!r} {problem}")
    config = doc.get("config")
    claimed = config.get("stack") if isinstance(config, dict) else None
    if isinstance(claimed, str) and claimed != stack:
        raise SpecError.at(where, f"config.stack says {claimed[:60]!r} but its resources' URNs are of stack {stack!r}; "
                                  "the document is not one preview of one stack")
    if named is not None and named != stack:
        raise SpecError.at(where, f"--stack {named} was given, but the preview's resources are of stack {stack!r}; "
                                  f"pass --stack {stack}, or the preview of {named}")
    return stack


REPLACE_OPS = frozenset({"replace", "create-replacement"})
"""Steps that put a new resource in place of an old one (pulumi/pulumi pkg/display/json.go PreviewStep: both
`oldState` and `newState`, with `replaceReasons`, the property keys that force it)."""


def replaced_states(doc: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any], list[str]]]:
    """(old state, new state, replace reasons) of each resource the preview replaces, once per URN."""
    found: dict[str, tuple[dict[str, Any], dict[str, Any], list[str]]] = {}
    for step in doc.get("steps") or []:
        if not isinstance(step, dict) or step.get("op") not in REPLACE_OPS:
            continue
        old, new = _state(step, "oldState"), _state(step, "newState")
        if old is not None and new is not None and old["urn"] not in found:
            reasons = step.get("replaceReasons")
            found[old["urn"]] = (old, new, [str(r) for r in reasons] if isinstance(reasons, list) else [])
    return list(found.values())


@dataclass(frozen=True)
class DeclaredState:
    """A state as the program declared it (components/offline/manifests.py `Declared`): what the program's checks
    read from a saved preview as from a run under mocks."""

    type: str
    name: str
    custom: bool
    inputs: dict[str, Any]


def declared(states: list[dict[str, Any]]) -> list[DeclaredState]:
    """`steps_from_preview`'s states as declared resources, each named by its URN's last part."""
    return [DeclaredState(s["type"], s["urn"].rsplit("::", 1)[-1], bool(s.get("custom")), s.get("inputs") or {})
            for s in states]
