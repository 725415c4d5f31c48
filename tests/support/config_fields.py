"""Fields of a configuration document checked against the JSON fields of its Go structs, as
tools/extract_consumer_facts.py saved them (components/catalog/facts/consumers/config-*.json)."""

from __future__ import annotations

import json
from typing import Any

from tools.facts_home import CONSUMERS

CATALOGUES = CONSUMERS


def config_schema(name: str) -> dict[str, Any]:
    return json.loads((CATALOGUES / f"config-{name}.json").read_text())


def config_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> schema, for every saved one."""
    schemas = [json.loads(p.read_text()) for p in sorted(CATALOGUES.glob("config-*.json"))]
    return {(s["apiVersion"], s["root"]): s for s in schemas}


def unknown_config_fields(config: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """Fields of a strictly decoded Go config that its structs do not define (JSON names; inline structs merged;
    maps, and types read from no file (durations, quantities), take any value)."""
    structs: dict[str, dict[str, str]] = schema["structs"]

    def fields(struct: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, kind in structs[struct].items():
            out.update(fields(kind) if name.startswith("<inline>") and kind in structs else {name: kind})
        return {k: v for k, v in out.items() if not k.startswith("<inline>")}

    found: list[str] = []

    def walk(value: Any, kind: str, path: str) -> None:
        bare = kind.lstrip("*")
        if bare.startswith("[]"):
            for i, item in enumerate(value if isinstance(value, list) else []):
                walk(item, bare[2:], f"{path}[{i}]")
        elif bare in structs and isinstance(value, dict):
            known = fields(bare)
            for key, item in value.items():
                if key not in known:
                    found.append(f"{path}.{key}" if path else key)
                else:
                    walk(item, known[key], f"{path}.{key}" if path else key)

    walk(config, schema["root"], "")
    return found
