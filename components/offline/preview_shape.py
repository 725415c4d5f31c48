"""The shape of a preview document, checked where it is read so that the policies, the ARM preflight and `diff`
only ever see well-typed data. Every problem names the file and the JSON path, in one line.

The envelope is pulumi/pulumi `pkg/backend/display/json.go` (ShowPreviewDigest: `steps` with `op`, `urn`,
`oldState`, `newState`) and `sdk/go/common/apitype` (ResourceV3: `urn`, `type`, `custom`, `inputs`, `parent`,
`dependencies`, `protect`, `provider`, `id`); gpucluster's own preview adds `ignoreChanges` and `secretDigests`.
Inside `inputs`, the fields the tool's own readers compute with have the types their providers' schemas give
them (INPUT_SHAPES). A preview may hold an unknown or masked value anywhere: those are strings, accepted in
place of any shape.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from gpucluster.catalog.preview_values import UNKNOWN, UNKNOWN_MARK
from gpucluster.errors import Problem
from gpucluster.offline.engine import SECRET_MARK

# Step ops, from pulumi/pulumi pkg/resource/deploy/step.go (OpSame ... OpImportReplacement). Deletes and discards
# carry only `oldState` (pkg/backend/display/json.go, ShowPreviewDigest); the rest carry `newState`.
OLD_STATE_OPS = frozenset({"delete", "delete-replaced", "discard", "discard-replaced", "remove-pending-replace"})
NEW_STATE_OPS = frozenset({"same", "create", "update", "replace", "create-replacement", "read", "read-replacement",
                           "refresh", "import", "import-replacement"})
PLACEHOLDERS = frozenset({UNKNOWN, UNKNOWN_MARK, SECRET_MARK})
"""Values a preview shows instead of the real one: unknown during preview, or a masked secret."""
MAX_PROBLEMS = 20
MAX_WHOLE = 2**53
"""Whole numbers beyond this lose precision in JSON's usual float reading (RFC 8259, section 6) and in sums."""
MAX_IGNORED = 100
"""ignoreChanges entries on one resource: a resource ignores a handful of inputs."""

Check = Callable[[Any], str | None]


def _text(value: Any) -> str | None:
    return None if isinstance(value, str) else "must be text"


def _flag(value: Any) -> str | None:
    return None if isinstance(value, bool) else "must be true or false"


def _object(value: Any) -> str | None:
    return None if isinstance(value, dict) else "must be an object"


def _optional_text(value: Any) -> str | None:
    return None if value is None or isinstance(value, str) else "must be text (or null)"


def _text_list(value: Any) -> str | None:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return "must be a list of text"
    return None


def _text_map(value: Any) -> str | None:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        return "must be an object of text values"
    return None


def _whole(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_WHOLE:
        return f"must be a whole number from 0 to {MAX_WHOLE:,}"
    return None


def _quantity(value: Any) -> str | None:
    """A Kubernetes resource quantity: text (`500m`, `56Gi`) or a number."""
    if isinstance(value, str):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not -MAX_WHOLE <= value <= MAX_WHOLE:
        return f"must be a quantity (text such as 500m or 56Gi, or a number of at most {MAX_WHOLE:,})"
    return None


def _list_of_objects(value: Any) -> str | None:
    if not isinstance(value, list) or not all(isinstance(item, dict) or (isinstance(item, str) and item in PLACEHOLDERS)
                                               for item in value):
        return "must be a list of objects"
    return None


STATE_FIELDS: dict[str, Check] = {
    "type": _text, "urn": _text, "custom": _flag, "inputs": _object, "parent": _optional_text,
    "dependencies": _text_list, "protect": _flag, "ignoreChanges": _text_list, "provider": _optional_text,
    "id": _optional_text,
}
"""apitype.ResourceV3's fields that the tool reads, with their JSON types (`parent`, `provider`, `id` may be
null in gpucluster's own preview)."""

# Input fields the tool computes with, by resource type ("*" of a provider: every type of it), as
# dotted paths with `[]` for every item of a list.
_AZURE = {"tags": _text_map}  # ARM: tags are map[string]string on every tracked resource
_KUBERNETES = {"metadata": _object, "metadata.name": _text, "metadata.namespace": _text,
               "metadata.labels": _text_map, "metadata.annotations": _text_map}  # ObjectMeta (k8s.io/apimachinery)
INPUT_SHAPES: dict[str, dict[str, Check]] = {
    "azure-native:compute:VirtualMachineScaleSet": {  # ARM Sku: name string, capacity int64
        "sku": _object, "sku.name": _text, "sku.capacity": _whole, "zones": _text_list},
    "azure-native:compute:VirtualMachine": {"hardwareProfile": _object, "hardwareProfile.vmSize": _text,
                                            "zones": _text_list},
    "azure-native:network:Subnet": {"addressPrefix": _text, "subnetName": _text},
    "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue": {  # Kueue ClusterQueueSpec.resourceGroups
        "spec": _object, "spec.resourceGroups": _list_of_objects,
        "spec.resourceGroups[].flavors": _list_of_objects, "spec.resourceGroups[].flavors[].name": _text,
        "spec.resourceGroups[].flavors[].resources": _list_of_objects,
        "spec.resourceGroups[].flavors[].resources[].name": _text,
        "spec.resourceGroups[].flavors[].resources[].nominalQuota": _quantity},
}


def _shapes(resource_type: str) -> Iterator[tuple[str, Check]]:
    if resource_type.startswith("azure-native:"):
        yield from _AZURE.items()
    if resource_type.startswith("kubernetes:") and not resource_type.startswith(("kubernetes:helm.sh/",
                                                                                   "kubernetes:yaml/")):
        yield from _KUBERNETES.items()
    yield from INPUT_SHAPES.get(resource_type, {}).items()


def _at(value: Any, parts: list[str], path: str) -> Iterator[tuple[str, Any]]:
    """(JSON path, value) for every value at `parts` under `value`; missing fields and placeholders are skipped."""
    if isinstance(value, str) and value in PLACEHOLDERS:
        return
    if not parts:
        yield path, value
        return
    head, rest = parts[0], parts[1:]
    key, each = (head[:-2], True) if head.endswith("[]") else (head, False)
    if not isinstance(value, dict) or key not in value:
        return
    item = value[key]
    if not each:
        yield from _at(item, rest, f"{path}.{key}")
    elif isinstance(item, list):
        for index, element in enumerate(item):
            yield from _at(element, rest, f"{path}.{key}[{index}]")


def input_problems(resource_type: str, inputs: dict[str, Any], path: str) -> Iterator[str]:
    for field, check in _shapes(resource_type):
        for where, value in _at(inputs, field.split("."), path):
            if not (isinstance(value, str) and value in PLACEHOLDERS) and (problem := check(value)) is not None:
                yield f"{where} {problem}"


def _state_problems(state: dict[str, Any], path: str, urn: str) -> Iterator[str]:
    for field, check in STATE_FIELDS.items():
        if field in state and (problem := check(state[field])) is not None:
            yield f"{path}.{field} {problem}"
            return
    if not state.get("type"):
        yield f"{path}.type must be the resource type (text, such as azure-native:network:VirtualNetwork)"
    elif state.get("urn", urn) != urn:
        yield f"{path}.urn differs from the step's urn"
    elif len(state.get("ignoreChanges") or ()) > MAX_IGNORED:
        yield f"{path}.ignoreChanges holds more than {MAX_IGNORED} entries; a resource ignores a handful of inputs"
    else:
        yield from input_problems(state["type"], state.get("inputs") or {}, f"{path}.inputs")


def urn_problem(urn: Any) -> str | None:
    """`urn:pulumi:<stack>::<project>::<type>::<name>` (sdk/go/common/resource/urn.go)."""
    if not isinstance(urn, str) or not urn.startswith("urn:pulumi:") or len(urn.split("::", 3)) < 4:
        return "must be a Pulumi URN: text of the form urn:pulumi:<stack>::<project>::<type>::<name>"
    return None


def _step_problems(index: int, step: Any, seen: set[tuple[str, str]]) -> Iterator[str]:
    path = f"steps[{index}]"
    if not isinstance(step, dict):
        yield f"{path} must be an object with op, urn and newState/oldState"
        return
    op, urn = step.get("op"), step.get("urn")
    if not isinstance(op, str) or op not in OLD_STATE_OPS | NEW_STATE_OPS:
        yield f"{path}.op must be a Pulumi step op ({', '.join(sorted(NEW_STATE_OPS | OLD_STATE_OPS))})"
        return
    if not isinstance(urn, str) or urn_problem(urn) is not None:
        yield f"{path}.urn {urn_problem(urn)}"
        return
    if (urn, op) in seen:
        yield f"{path}: {op} of {urn[:200]} appears twice"
        return
    seen.add((urn, op))
    needed = "oldState" if op in OLD_STATE_OPS else "newState"
    if not isinstance(step.get(needed), dict):
        yield f"{path}.{needed} must be an object ({op} steps carry it, as `pulumi preview --json` writes them)"
        return
    for key in ("oldState", "newState"):
        if key in step:
            if not isinstance(step[key], dict):
                yield f"{path}.{key} must be an object"
            else:
                yield from _state_problems(step[key], f"{path}.{key}", urn)


def _envelope_problems(document: Any) -> Iterator[str]:
    if not isinstance(document, dict):
        yield "not a preview: expected a JSON object with `steps`, as `pulumi preview --json` or `gpucluster plan` writes"
        return
    steps = document.get("steps")
    if not isinstance(steps, list):
        yield "steps must be a list, as `pulumi preview --json` or `gpucluster plan` writes it"
        return
    if not steps:
        yield "holds no resources to check: its `steps` list is empty; preview a stack that declares resources"
        return
    config = document.get("config", {})
    if not isinstance(config, dict):
        yield "config must be an object"
    elif "stack" in config and not isinstance(config["stack"], str):
        yield "config.stack must be text (the stack's name)"
    digests = document.get("secretDigests", {})
    if not isinstance(digests, dict) or not all(_text_map(v) is None for v in digests.values()):
        yield "secretDigests must be an object of URN -> {input path: digest text}"
    seen: set[tuple[str, str]] = set()
    for index, step in enumerate(steps):
        yield from _step_problems(index, step, seen)


def preview_problems(document: Any, where: str) -> list[Problem]:
    """At most MAX_PROBLEMS problems with a preview's shape, each at its JSON path in `where`."""
    problems: list[Problem] = []
    for problem in _envelope_problems(document):
        problems.append(Problem(where, problem))
        if len(problems) >= MAX_PROBLEMS:
            break
    return problems
