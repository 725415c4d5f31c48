"""Request bodies for node scale sets, shaped by azure-mgmt-compute's own models.

The declared inputs are azure-native's shape: camelCase, with each `properties` envelope that Microsoft's
spec marks `x-ms-client-flatten` flattened away. ARM wants the envelopes back. The SDK's models know both:
each field's wire name and type, and which of a model's fields live in its `properties` (the generated
`__flattened_items`). This module walks a model to rebuild the wire body, and back.

A key the model does not carry is refused (UnknownFieldError), never dropped: that silent drop is what kept the
/28 field from reaching ARM through azure-native 3.29 (its request body is built from its own schema,
pulumi-azure-native provider/pkg/convert/sdkInputsToRequestBody.go). The PATCH body is built from the update
model, which leaves out what Azure cannot change in place (components/azure/scale_set/routes.py CREATE_ONLY_PATHS).

The SDK is imported on first use only: planning never builds a body.
"""

from __future__ import annotations

import functools
import threading
import types
import typing
from dataclasses import dataclass
from typing import Any

SCALE_SET_MODEL = "VirtualMachineScaleSet"
SCALE_SET_UPDATE_MODEL = "VirtualMachineScaleSetUpdate"


class UnknownFieldError(ValueError):
    """A declared key the SDK's model (at the pinned version) does not carry."""

    def __init__(self, path: str, model: str) -> None:
        super().__init__(f"{path}: {model} (azure-mgmt-compute) has no such field; remove it or move to an SDK "
                         "release and api-version that carry it")
        self.path = path


@dataclass(frozen=True)
class Kind:
    """What a field holds: a nested model, a list or a map of something, or a plain value."""

    shape: str
    """model, list, map or leaf."""
    model: type | None = None
    item: Kind | None = None


@dataclass(frozen=True)
class Field:
    rest_name: str
    kind: Kind
    envelope: str | None
    """`properties` when the wire body nests the field there (flattened in the declared shape)."""
    readonly: bool


def _sdk() -> tuple[Any, Any, type, type]:
    from azure.mgmt.compute import models
    from azure.mgmt.compute._utils import model_base
    from azure.mgmt.compute.models import _models

    return models, _models, model_base.Model, type(model_base.rest_field())


def _kind(annotation: Any) -> Kind:
    _, _, model_type, _ = _sdk()
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        for option in options:
            if isinstance(option, type) and issubclass(option, model_type):
                return Kind("model", option)
        kinds = [_kind(option) for option in options]
        return next((k for k in kinds if k.shape != "leaf"), Kind("leaf"))
    if origin is list:
        return Kind("list", item=_kind(typing.get_args(annotation)[0]))
    if origin is dict:
        return Kind("map", item=_kind(typing.get_args(annotation)[1]))
    if isinstance(annotation, type) and issubclass(annotation, model_type):
        return Kind("model", annotation)
    return Kind("leaf")


def _own_fields(cls: type) -> dict[str, Field]:
    """attribute name -> field, from the model's rest_field descriptors and annotations."""
    models, module, _, rest_field_type = _sdk()
    hints = typing.get_type_hints(cls, globalns={**vars(module), "_models": models})
    found: dict[str, Field] = {}
    for klass in reversed(cls.__mro__):
        # A snapshot: the SDK's Model sets class attributes on first instantiation, which another of the host's four
        # worker threads may be doing now (iterating the live dict raised "dictionary changed size during iteration").
        for attr, value in list(vars(klass).items()):
            if isinstance(value, rest_field_type):
                found[attr] = Field(value._rest_name_input or attr, _kind(hints[attr]), None,
                                    value._visibility == ["read"])
    return found


_FIELDS_LOCK = threading.Lock()


def fields(cls: type) -> dict[str, Field]:
    """wire name -> field in the declared (flattened) shape: the model's own fields, and its envelope's. Computed once
    per model under a lock: Pulumi's dynamic-provider host runs up to four provider calls at once."""
    with _FIELDS_LOCK:
        return _fields(cls)


@functools.cache
def _fields(cls: type) -> dict[str, Field]:
    own = _own_fields(cls)
    flattened = getattr(cls, f"_{cls.__name__}__flattened_items", None)
    result = {f.rest_name: f for attr, f in own.items()}
    if flattened:
        envelope = own["properties"]
        inner = _own_fields(envelope.kind.model) if envelope.kind.model is not None else {}
        del result[envelope.rest_name]
        for attr in flattened:
            f = inner[attr]
            result[f.rest_name] = Field(f.rest_name, f.kind, envelope.rest_name, f.readonly)
    return result


def model(name: str) -> type:
    models, _, _, _ = _sdk()
    return getattr(models, name)


def _to_wire(value: Any, kind: Kind, path: str, strict: bool) -> Any:
    if kind.shape == "model" and isinstance(value, dict) and kind.model is not None:
        return _model_to_wire(value, kind.model, path, strict)
    if kind.shape == "list" and isinstance(value, list) and kind.item is not None:
        return [_to_wire(v, kind.item, f"{path}[{i}]", strict) for i, v in enumerate(value)]
    if kind.shape == "map" and kind.item is not None:
        if isinstance(value, list) and kind.item.shape == "model":
            # azure-native declares user-assigned identities as a list of ids; the wire body is a map keyed by them.
            return {str(v): {} for v in value}
        if isinstance(value, dict):
            return {k: _to_wire(v, kind.item, f"{path}.{k}", strict) for k, v in value.items()}
    return value


def _model_to_wire(flat: dict[str, Any], cls: type, path: str, strict: bool) -> dict[str, Any]:
    known = fields(cls)
    wire: dict[str, Any] = {}
    for key, value in flat.items():
        where = f"{path}.{key}" if path else key
        field = known.get(key)
        if field is None or field.readonly:
            if strict:
                raise UnknownFieldError(where, cls.__name__)
            continue
        target = wire.setdefault(field.envelope, {}) if field.envelope else wire
        target[key] = _to_wire(value, field.kind, where, strict)
    return wire


def to_wire(flat: dict[str, Any], model_name: str = SCALE_SET_MODEL, strict: bool = True) -> dict[str, Any]:
    """The wire body for `flat` (declared shape). strict: refuse keys the model lacks; otherwise leave them out
    (the update body, which carries only what Azure changes in place)."""
    return _model_to_wire(flat, model(model_name), "", strict)


def _from_wire(value: Any, kind: Kind) -> Any:
    if kind.shape == "model" and isinstance(value, dict) and kind.model is not None:
        return _model_from_wire(value, kind.model)
    if kind.shape == "list" and isinstance(value, list) and kind.item is not None:
        return [_from_wire(v, kind.item) for v in value]
    if kind.shape == "map" and isinstance(value, dict) and kind.item is not None:
        return {k: _from_wire(v, kind.item) for k, v in value.items()}
    return value


def _model_from_wire(wire: dict[str, Any], cls: type) -> dict[str, Any]:
    known = fields(cls)
    envelopes = {f.envelope for f in known.values() if f.envelope}
    flat: dict[str, Any] = {}
    for key, value in wire.items():
        if key in envelopes and isinstance(value, dict):
            for inner_key, inner in value.items():
                field = known.get(inner_key)
                flat[inner_key] = _from_wire(inner, field.kind) if field else inner
            continue
        field = known.get(key)
        flat[key] = _from_wire(value, field.kind) if field else value
    return flat


def from_wire(wire: dict[str, Any], model_name: str = SCALE_SET_MODEL) -> dict[str, Any]:
    """The declared (flattened) shape of a wire body, as a GET returns it."""
    return _model_from_wire(wire, model(model_name))


def create_only_paths_at(definitions: dict[str, dict[str, str | None]], root: str,
                         create: str = SCALE_SET_MODEL) -> list[str]:
    """Writable fields of the SDK's create model that the REST update definitions (`definitions`, read from the spec
    at the api-version we send: components/azure/scale_set/update_schema.py) do not carry, as dotted paths in the
    declared shape (`[]` after a list)."""
    return _create_only_at(model(create), definitions, root, "")


def _create_only_at(create: type, definitions: dict[str, dict[str, str | None]], definition: str,
                    path: str) -> list[str]:
    found: list[str] = []
    update = definitions[definition]
    for key, field in fields(create).items():
        if field.readonly:
            continue
        where = f"{path}.{key}" if path else key
        if key not in update:
            found.append(where)
            continue
        kind, nested = field.kind, update[key]
        while kind.shape == "list" and kind.item is not None:
            kind, where = kind.item, where + "[]"
        if nested is not None and kind.shape == "model" and kind.model is not None:
            found += _create_only_at(kind.model, definitions, nested, where)
    return found

