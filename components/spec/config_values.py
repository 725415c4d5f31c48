"""Config values outside `gpucluster:cluster` as plain data: text, numbers, booleans, null, lists and objects
with text keys.

PyYAML also builds YAML 1.1 dates, `!!binary` bytes and `!!set`s. None has a JSON form, so the engine cannot
hand them to the program (it passes config as JSON, as Pulumi does), and Pulumi reads a scalar config value as
its text (pulumi/pulumi sdk/go/common/resource/config/value.go, UnmarshalYAML: a scalar unmarshals into a
string), so the plan and `pulumi up` would read different values. Refused with the key and the fix, before
planning.
"""

from __future__ import annotations

import datetime
import math
from typing import Any

from components.errors import Problem

_FIXES: tuple[tuple[type, str], ...] = (
    (datetime.date, "is a YAML date (an unquoted `2024-01-01`); quote it so it stays text, as Pulumi reads it"),
    (bytes, "is a YAML `!!binary` value; give the base64 text as a quoted string"),
    (set, "is a YAML `!!set`; give a list (`[a, b]`)"),
    (frozenset, "is a YAML `!!set`; give a list (`[a, b]`)"),
)


def _problem(value: Any) -> str | None:
    if value is None or isinstance(value, str | bool | int | list | dict):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else "is not a finite number (`.nan`, `.inf`); give a number or quote it"
    for kind, fix in _FIXES:
        if isinstance(value, kind):
            return fix
    return f"is a YAML {type(value).__name__}, which a Pulumi config value cannot hold; give text, a number, a list or a mapping"


def config_value_problems(config: dict[Any, Any], skip: str) -> list[Problem]:
    """One problem per config value (or nested key) that is not plain data, at its path under `config`."""
    problems: list[Problem] = []
    stack: list[tuple[Any, str]] = []
    for key, value in config.items():
        if not isinstance(key, str):
            problems.append(Problem("config", f"the key {str(key)[:60]!r} is not text; quote it (`namespace:name`)"))
        elif key != skip:
            stack.append((value, f"config.{key}"))
    while stack and len(problems) < 20:
        value, path = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    problems.append(Problem(path, f"the key {str(key)[:60]!r} is not text; quote it"))
                else:
                    stack.append((item, f"{path}.{key}"))
        elif isinstance(value, list):
            stack.extend((item, f"{path}[{index}]") for index, item in enumerate(value))
        elif (problem := _problem(value)) is not None:
            problems.append(Problem(path, problem))
    return sorted(problems, key=lambda p: p.path)
