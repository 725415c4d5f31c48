"""One side of a diff: a plan folder (`gpucluster plan --out`) or a preview file, read into resource states."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.diff.plan_folder import check_plan_folder
from components.errors import SpecError
from components.offline.preview import read_preview
from components.offline.preview_steps import steps_from_preview

BOOT_FOLDER = "boot"


@dataclass(frozen=True)
class Side:
    label: str
    resources: dict[str, dict[str, Any]]
    """URN -> state (type, custom, inputs, protect, ignoreChanges when recorded, ...)."""
    secret_digests: dict[str, dict[str, str]]
    """URN -> {input path: digest} of masked secrets (gpucluster's previews only)."""
    summary: dict[str, Any] | None = None
    """summary.json of a plan folder (capacity, IP plan, acknowledgements)."""
    boot: dict[str, str] | None = None
    """boot/ of a plan folder: relative path -> text (secret values already replaced by a marker)."""
    notes: list[str] = field(default_factory=list)


def side_from_document(label: str, document: dict[str, Any], summary: dict[str, Any] | None = None,
                       boot: dict[str, str] | None = None) -> Side:
    states = steps_from_preview(document, label)
    digests = document.get("secretDigests")
    return Side(label, {s["urn"]: s for s in states if s.get("custom")},
                digests if isinstance(digests, dict) else {}, summary, boot)


def _boot_files(folder: Path) -> dict[str, str] | None:
    boot = folder / BOOT_FOLDER
    if not boot.is_dir():
        return None
    files: dict[str, str] = {}
    for path in sorted(boot.rglob("*")):
        if path.is_file():
            try:
                files[str(path.relative_to(boot))] = path.read_bytes().decode("utf-8")  # CRs kept, as written
            except (OSError, UnicodeDecodeError):
                files[str(path.relative_to(boot))] = f"(unreadable: {path.stat().st_size} bytes)"
    return files


def load_side(location: str) -> Side:
    """A plan folder (preview.json, summary.json, boot/ when present) or a preview.json file."""
    path = Path(location)
    if path.is_dir():
        path = check_plan_folder(path, ("preview.json", "summary.json", BOOT_FOLDER))  # links refused: exit 2
        preview = path / "preview.json"
        if not preview.is_file():
            raise SpecError.at(location, "no preview.json in this folder; give a `gpucluster plan --out` folder or "
                                         "a preview file")
        summary = None
        if (path / "summary.json").is_file():
            try:
                summary = json.loads((path / "summary.json").read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError) as error:
                raise SpecError.at(str(path / "summary.json"), f"not valid JSON: {error}") from None
            if not isinstance(summary, dict) or not all(isinstance(summary.get(key, {}), dict)
                                                        for key in ("ipPlan", "totals", "acknowledgeDeletions")):
                raise SpecError.at(str(path / "summary.json"), "not a summary `gpucluster plan` writes; plan again")
        return side_from_document(location, read_preview(preview), summary, _boot_files(path))
    return side_from_document(location, read_preview(path))
