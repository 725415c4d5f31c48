"""Where the tools write what they extract from upstream sources: components/catalog/facts/ (package data of
gpucluster.catalog, read through gpucluster.catalog.fact_files), one JSON file per fact set, each naming the tool that
writes it in a top-level `generator` key (tests/test_generated_facts.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FACTS = ROOT / "components" / "catalog" / "facts"
CONSUMERS = FACTS / "consumers"


def generator_of(module_file: str) -> str:
    """A tool's path from the repository's root (`tools/acr_task_keys.py`), given its `__file__`."""
    return Path(module_file).resolve().relative_to(ROOT).as_posix()


def with_generator(generator: str, facts: Mapping[str, Any]) -> dict[str, Any]:
    return {"generator": generator, **{key: value for key, value in facts.items() if key != "generator"}}


def write_facts(path: Path, generator: str, facts: Mapping[str, Any], *, indent: int = 2,
                sort_keys: bool = False) -> None:
    path.write_text(json.dumps(with_generator(generator, facts), indent=indent, sort_keys=sort_keys) + "\n",
                    encoding="utf-8")
