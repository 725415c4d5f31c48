"""One side of a diff: a plan folder (`gpucluster plan --out`) or a preview file, read into resource states."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpucluster.diff.plan_folder import check_plan_folder
from gpucluster.errors import SpecError
from gpucluster.input_files import KIB, MIB, load_json, read_bounded
from gpucluster.offline.preview import read_preview
from gpucluster.offline.preview_steps import preview_stack, steps_from_preview

BOOT_FOLDER = "boot"
MAX_SUMMARY_BYTES = 4 * MIB
"""summary.json of prod is 76 KB with its cost (60 KB before it), of prod x4 (bench/) 140 KB before the cost."""
MAX_BOOT_FILE_BYTES = 256 * KIB
"""A boot document becomes a VM's customData, which Azure caps at 65,535 bytes (azure-rest-api-specs
Microsoft.Compute OSProfile.customData: "The maximum length of the binary array is 65535 bytes"); prod's largest,
the API servers', is about 41 KB with real keys (components/offline/custom_data_size.py measures each)."""
MAX_BOOT_FILES = 2_000
"""prod writes 52 boot documents, prod x4 about 150."""


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
    preview_stack(document, label, None)  # one stack, and the one the document says it is of
    digests = document.get("secretDigests")
    return Side(label, {s["urn"]: s for s in states if s.get("custom")},
                digests if isinstance(digests, dict) else {}, summary, boot)


def _boot_files(folder: Path) -> dict[str, str] | None:
    boot = folder / BOOT_FOLDER
    if not boot.is_dir():
        return None
    entries: list[Path] = []
    for entry in boot.rglob("*"):  # counted as found: a folder of millions of entries is never listed whole
        entries.append(entry)
        if len(entries) > MAX_BOOT_FILES:
            raise SpecError.at(str(boot), f"holds more than {MAX_BOOT_FILES:,} entries; not a `gpucluster plan` "
                                          "boot/ folder (docs/operations.md, \"Input bounds\")")
    files: dict[str, str] = {}
    for path in sorted(entries):
        if path.is_file():
            try:
                text = read_bounded(path, MAX_BOOT_FILE_BYTES, "boot document").decode("utf-8")  # CRs kept
            except UnicodeDecodeError:
                text = f"(not UTF-8 text: {path.stat().st_size} bytes)"
            files[str(path.relative_to(boot))] = text
    return files


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 2**53


def _summary_problem(summary: Any) -> str | None:
    """What `diff` reads from summary.json, with the types `gpucluster plan` writes."""
    if not isinstance(summary, dict):
        return "not a summary `gpucluster plan` writes (a JSON object); plan again"
    for key in ("ipPlan", "totals", "acknowledgeDeletions"):
        if not isinstance(summary.get(key, {}), dict):
            return f"{key} must be an object; plan again"
    pod_ips = summary.get("ipPlan", {}).get("podIps", {"needed": 0, "available": 0})
    if not isinstance(pod_ips, dict) or not all(_whole(pod_ips.get(k)) for k in ("needed", "available")):
        return "ipPlan.podIps must be an object of whole numbers (needed, available); plan again"
    for kind in ("teams", "infinibandDomains"):
        names = summary.get("acknowledgeDeletions", {}).get(kind, [])
        if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
            return f"acknowledgeDeletions.{kind} must be a list of names; plan again"
    return None


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
        if (path / "summary.json").exists():
            where = str(path / "summary.json")
            summary = load_json(read_bounded(path / "summary.json", MAX_SUMMARY_BYTES, "summary.json"), where,
                                "summary.json")
            if (problem := _summary_problem(summary)) is not None:
                raise SpecError.at(where, problem)
        return side_from_document(location, read_preview(preview), summary, _boot_files(path))
    return side_from_document(location, read_preview(path))
