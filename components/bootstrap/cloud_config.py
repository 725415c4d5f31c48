"""The `#cloud-config` text every machine boots with, one YAML style for all of them.

Multi-line file contents are written as literal blocks (`|`), so the documents in `out/<stack>/boot/`
read as the files they create. cloud-init parses both styles alike (YAML 1.1, `yaml.safe_load`).

The text is emitted by libyaml (PyYAML's `CSafeDumper`) when PyYAML was built with it, as the wheels are: the
same bytes as the pure-Python emitter (tests/test_boot_documents.py compares the two on every shipped stack's
documents) at a tenth of the time, which a plan spends once per scale set and again for `boot/`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml

EMITTER: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _string(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


def literal_dumper(base: type[yaml.SafeDumper]) -> type[yaml.SafeDumper]:
    """`base` writing multi-line strings as literal blocks."""
    dumper = type("LiteralDumper", (base,), {})
    dumper.add_representer(str, _string)
    return dumper


_CLOUD_CONFIG = literal_dumper(EMITTER)


def dump_cloud_config(document: dict[str, Any]) -> str:
    return "#cloud-config\n" + yaml.dump(document, Dumper=_CLOUD_CONFIG, sort_keys=False, width=1_000_000)


def safe_yaml(document: Any) -> str:
    """`yaml.safe_dump(document, sort_keys=False)`, on the same emitter."""
    return yaml.dump(document, Dumper=EMITTER, sort_keys=False)


def safe_yaml_all(documents: Iterable[Any]) -> str:
    """`yaml.safe_dump_all(documents, sort_keys=False)`, on the same emitter."""
    return yaml.dump_all(documents, Dumper=EMITTER, sort_keys=False)
