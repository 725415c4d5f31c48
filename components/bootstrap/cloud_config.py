"""The `#cloud-config` text every machine boots with, one YAML style for all of them.

Multi-line file contents are written as literal blocks (`|`), so the documents in `out/<stack>/boot/`
read as the files they create. cloud-init parses both styles alike (YAML 1.1, `yaml.safe_load`).
"""

from __future__ import annotations

from typing import Any

import yaml


class _Dumper(yaml.SafeDumper):
    pass


def _string(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _string)


def dump_cloud_config(document: dict[str, Any]) -> str:
    return "#cloud-config\n" + yaml.dump(document, Dumper=_Dumper, sort_keys=False, width=1_000_000)
