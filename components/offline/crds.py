"""The CustomResourceDefinitions of the custom objects the program declares, from the copies vendored under
components/kubernetes/crds/<chart>-<version>/ (the same definitions the chart installs at deploy time, e.g.
kubernetes-sigs/kueue v0.19.2 `config/components/crd/bases`, which the chart carries as templates).

manifests/ includes them so that the folder applies on its own: without the definition, the API server
refuses a custom object ("no matches for kind").
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

CRD_ROOT = Path(__file__).resolve().parent.parent / "kubernetes" / "crds"
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def group_of(api_version: str) -> str:
    """`kueue.x-k8s.io/v1beta2` -> `kueue.x-k8s.io`; `v1` (the core group) -> ``."""
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


@functools.cache
def _vendored() -> dict[tuple[str, str], str]:
    """(group, kind) -> the CRD file's text."""
    found: dict[tuple[str, str], str] = {}
    for path in sorted(CRD_ROOT.glob("*/*.yaml")):
        text = path.read_text(encoding="utf-8")
        crd = yaml.load(text, Loader=_LOADER)
        found[(crd["spec"]["group"], crd["spec"]["names"]["kind"])] = text
    return found


def crds_for(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The vendored definition of every custom kind among `objects`, once each, by (group, kind)."""
    used = sorted({(group_of(o["apiVersion"]), o["kind"]) for o in objects} & set(_vendored()))
    return [yaml.load(_vendored()[key], Loader=_LOADER) for key in used]
