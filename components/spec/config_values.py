"""Config keys as Pulumi parses them, and config values outside `gpucluster:cluster` as plain data.

Pulumi parses every key under `config:` with ParseKey (pulumi/pulumi sdk/go/common/resource/config/key.go,
Key.UnmarshalYAML): `<namespace>:<name>` or `<namespace>:config:<name>`; anything else ("1", "name") fails to
load ("could not parse 1 as a configuration key"). Refused here with the key and the fix.

Values need no such check: the stack-file reader (components/spec/yaml_text.py, yaml_go.py) already gives them as
Pulumi does (config/value.go UnmarshalYAML -> object.go unmarshalObject decodes each value into `any` with
gopkg.in/yaml.v3): a date is the text of Go's `time.Time.String()`, a `!!binary` value its decoded text, a `!!set`
a mapping of its members to null. Pulumi accepts all three, so the plan does too. The walk below still guards
the plain-data shape in case a value reaches it another way.
"""

from __future__ import annotations

import datetime
import math
from typing import Any

from gpucluster.errors import Problem

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


def _pulumi_key(key: str) -> bool:
    """key.go ParseKey: one ':' (`<namespace>:<name>`), or two as `<namespace>:config:<name>`."""
    parts = key.split(":")
    return len(parts) == 2 or (len(parts) == 3 and parts[1] == "config")


def config_value_problems(config: dict[Any, Any], skip: str) -> list[Problem]:
    """One problem per config value (or nested key) that is not plain data, at its path under `config`."""
    problems: list[Problem] = []
    stack: list[tuple[Any, str]] = []
    for key, value in config.items():
        if not isinstance(key, str):
            problems.append(Problem("config", f"the key {str(key)[:60]!r} is not text; quote it (`namespace:name`)"))
        elif not _pulumi_key(key):
            problems.append(Problem("config", f"the key {key[:60]!r} is not `<namespace>:<name>`, which Pulumi "
                                              "requires (`pulumi config set` writes `<project>:<name>`)"))
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
