"""The generated facts' home: components/catalog/facts/, package data of gpucluster.catalog.

Each JSON file there was extracted from an upstream source by a tool in tools/ and names that tool in its top-level
`generator` key, beside the repository, tag or commit it read (tests/test_generated_facts.py).
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any


def load_facts(name: str) -> Any:
    """One file under facts/, by its path there (`prices.json`, `consumers/flags-etcd.json`)."""
    return json.loads(resources.files("gpucluster.catalog").joinpath("facts", name).read_text("utf-8"))
