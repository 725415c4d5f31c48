"""The base every spec model shares: frozen, camelCase keys in YAML, unknown keys rejected."""

from __future__ import annotations

from ipaddress import IPv4Network
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Strict
from pydantic.alias_generators import to_camel


class SpecModel(BaseModel):
    model_config = ConfigDict(
        # Field patterns run on pydantic-core's Rust regex engine, where `$` matches only at the end of the text
        # as in Go (whose rules they stand for), not before a final newline as Python's re does.
        regex_engine="rust-regex",
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
    )


def _whole_number(value: object) -> object:
    """YAML `true` and `1.5` are not counts: pydantic's lax mode would read them as 1. A string of digits is
    taken as a number, since `pulumi config set --path` may store one as text."""
    if isinstance(value, bool | float):
        raise ValueError(f"must be a whole number (got {str(value).lower() if isinstance(value, bool) else value})")
    if isinstance(value, str) and value.strip().isdigit() and len(value) <= 12:
        return int(value)
    return value


def _real_number(value: object) -> object:
    if isinstance(value, bool):
        raise ValueError(f"must be a number (got {str(value).lower()})")
    return value


WholeNumber = Annotated[int, BeforeValidator(_whole_number), Strict()]
"""An int field that refuses booleans, floats and free text (see `_whole_number`)."""
RealNumber = Annotated[float, BeforeValidator(_real_number)]


def _cidr_text(value: object) -> object:
    """Only text such as "10.0.0.0/16": pydantic would otherwise read `1` or `true` as the address 0.0.0.1."""
    if not isinstance(value, str | IPv4Network):
        raise ValueError(f"must be an IPv4 network in CIDR form such as 10.0.0.0/16 (got {value!r})")
    return value


Cidr = Annotated[IPv4Network, BeforeValidator(_cidr_text)]
