"""Turn pydantic's validation errors into one readable line per problem, naming the YAML path."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from gpucluster.errors import Problem

_HINTS = {
    "missing": "is required; add it",
    "ip_v4_network": "must be an IPv4 network in CIDR form with no host bits set, such as 10.0.0.0/16",
    "int_parsing": "must be a whole number",
    "int_type": "must be a whole number",
    "bool_parsing": "must be true or false",
    "bool_type": "must be true or false",
    "list_type": "must be a list",
    "dict_type": "must be a mapping of keys to values",
    "model_type": "must be a mapping of keys to values",
    "string_type": "must be a string",
}


def yaml_path(root: str, loc: tuple[int | str, ...]) -> str:
    path = root
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def _model_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model class that owns the last key of `loc`, walking fields by their YAML (alias) names."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        field = next((f for n, f in current.model_fields.items() if part in (n, f.alias)), None)
        if field is None:
            return None
        current = _inner_model(field.annotation)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _inner_model(annotation: Any) -> Any:
    """Unwrap Optional / list / dict to the model class inside, if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (list, dict, typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            inner = _inner_model(arg)
            if inner is not None:
                return inner
    return None


SECRET_FIELDS: tuple[tuple[str, ...], ...] = (("access",), ("inCluster", "apiAccess", "proxyUrl"))
"""Where a stack holds or may be mistaken for a secret: SSH keys (a private key pasted for a public one), the
admin account, a proxy URL with credentials in it. An error there never quotes the value."""
_KEY_MATERIAL = ("PRIVATE KEY", "-----BEGIN", "-----END")
MAX_SHOWN = 80


def _shown(got: Any, loc: tuple[int | str, ...]) -> str:
    """`got` as an error line may quote it: cut to one short line, and never for a secret field or key material."""
    names = tuple(part for part in loc if isinstance(part, str))
    text = repr(got)
    if any(names[:len(field)] == field for field in SECRET_FIELDS) or any(m in text for m in _KEY_MATERIAL):
        return f"a {type(got).__name__}, not shown: this field can hold secrets"
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "..."


def _describe(error: ErrorDetails, model: type[BaseModel]) -> str:
    kind = error["type"]
    shown = _shown(error.get("input"), tuple(error["loc"]))
    ctx = error.get("ctx") or {}
    if kind == "extra_forbidden":
        owner = _model_at(model, tuple(error["loc"][:-1]))
        known = sorted(f.alias or n for n, f in owner.model_fields.items()) if owner else []
        return "unknown key; remove it or fix its spelling" + (f" (known keys: {', '.join(known)})" if known else "")
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        ops = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}
        bound = next(iter(ctx.values()), "?")
        return f"must be {ops[kind]} {bound} (got {shown})"
    if kind == "string_pattern_mismatch":
        return f"{shown} does not match the required form {ctx.get('pattern')}"
    if kind in ("too_short", "too_long"):
        return f"{error['msg'].lower()} (got {shown})"
    if kind == "value_error":
        return str(ctx.get("error", error["msg"]))
    hint = _HINTS.get(kind)
    if hint:
        return hint if kind == "missing" else f"{hint} (got {shown})"
    return f"{error['msg']} (got {shown})"


def problems_from(error: ValidationError, model: type[BaseModel], root: str = "cluster") -> list[Problem]:
    return [Problem(yaml_path(root, tuple(e["loc"])), _describe(e, model)) for e in error.errors()]
