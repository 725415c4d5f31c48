"""docs/configuration.md's key reference agrees with the spec models (tools/config_reference.py renders it)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from gpucluster.spec import ClusterSpec
from tools.config_reference import BEGIN, END, render, table

_FACTORY = object()  # a default_factory: the schema gives no default
PAGE = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"


def _generated_rows() -> list[list[str]]:
    text = PAGE.read_text(encoding="utf-8").split(BEGIN, 1)[1].split(END, 1)[0]
    return [re.split(r"(?<!\\)\| ", line.strip().rstrip("|"))[1:] for line in text.strip().splitlines()[2:]]


def _schema_keys() -> dict[str, Any]:
    """Every key path and its default, from pydantic's own JSON schema of ClusterSpec (not the page's walker)."""
    schema = ClusterSpec.model_json_schema(by_alias=True)
    defs = schema.get("$defs", {})

    def resolve(node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            node = defs[node["$ref"].rsplit("/", 1)[1]]
        return node

    def inner(node: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
        node = resolve(node)
        for option in node.get("anyOf", []):
            found = inner(option)
            if found[0] is not None:
                return found
        if node.get("type") == "array" and "items" in node:
            model, _ = inner(node["items"])
            return model, "[]."
        if node.get("type") == "object" and isinstance(node.get("additionalProperties"), dict):
            model, _ = inner(node["additionalProperties"])
            return model, ".<name>."
        return (node, ".") if "properties" in node else (None, ".")

    out: dict[str, Any] = {}

    def walk(node: dict[str, Any], prefix: str) -> None:
        required = set(node.get("required", []))
        for name, prop in node["properties"].items():
            key = prefix + name
            out[key] = "required" if name in required else prop.get("default", _FACTORY)
            model, suffix = inner(prop)
            if model is not None:
                walk(model, key + suffix)

    walk(schema, "")
    return out


def test_the_page_is_what_the_models_render() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert render(page) == page, "docs/configuration.md is out of date: run python -m tools.config_reference"
    assert table() in page


def test_every_key_of_the_models_is_on_the_page_once() -> None:
    listed = [row[0].strip().strip("`") for row in _generated_rows()]
    duplicates = sorted({k for k in listed if listed.count(k) > 1})
    assert duplicates == []
    assert sorted(set(_schema_keys()) - set(listed)) == [] and sorted(set(listed) - set(_schema_keys())) == []
    for top in ("pools[].racks.groups[].subgroups", "registry.dockerHub.passwordSecret", "tags", "rollout.batchPercent"):
        assert top in listed


def test_defaults_on_the_page_are_the_models() -> None:
    schema = _schema_keys()
    for key, _kind, default, _meaning in _generated_rows():
        key, default = key.strip().strip("`"), default.strip()
        expected = schema[key]
        if default == "as below":  # a nested model's default instance: its own keys follow
            assert isinstance(expected, dict) and any(k.startswith(key + ".") for k in schema), key
        elif expected == "required" or default == "required":
            assert default == expected, key
        elif expected is _FACTORY:
            assert default in ("`[]`", "`{}`"), key
        else:
            assert default.split(" (")[0] == "`" + json.dumps(expected, sort_keys=True) + "`", key


def test_every_top_level_and_pool_key_says_what_it_is() -> None:
    """A new key of `gpucluster:cluster` or of a pool comes with its docstring (the table's meaning column)."""
    unexplained = [row[0].strip().strip("`") for row in _generated_rows() if not row[3].strip()]
    assert [k for k in unexplained if "." not in k or (k.startswith("pools[].") and k.count(".") == 1)] == []


def test_no_field_docstring_is_orphaned() -> None:
    """A docstring after another string, not after a field, documents nothing (and the table would miss it)."""
    import ast

    orphans = []
    for path in sorted((Path(__file__).resolve().parent.parent / "components" / "spec").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                for before, after in zip(node.body, node.body[1:], strict=False):
                    if all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in (before, after)):
                        orphans.append(f"{path.name}:{after.lineno}")
    assert orphans == []
