"""Two plans -> what a change creates, updates, replaces and deletes, and what a reviewer must look at.

Errors are changes that would break running capacity or that Azure refuses (moved address blocks,
renamed scale sets, in-place changes Azure rejects, deleting or replacing a protected resource, unacknowledged
deletion of a team namespace or an InfiniBand domain); warnings are changes to look at twice (acknowledged
deletions, control-plane resizes).
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from components.diff.capacity import capacity_delta
from components.diff.replacement import refused, replacing
from components.diff.sides import Side
from components.planning.scheduling import TEAM_LABEL
from policies.rules.props import INFINIBAND_TAG, POOL_TAG, ROLE_TAG, SCALE_SET

SUBNET = "azure-native:network:Subnet"
NAMESPACE = "kubernetes:core/v1:Namespace"
BOOT_PATHS = ("virtualMachineProfile.osProfile.customData", "osProfile.customData", "userData",
              "virtualMachineProfile.userData")
MAX_DIFF_LINES = 60


@dataclass(frozen=True)
class Change:
    action: str
    """create, delete, update or replace."""
    urn: str
    type: str
    paths: tuple[str, ...] = ()
    replace_reasons: tuple[str, ...] = ()
    """`path (source)` for each change that forces the replacement."""

    @property
    def name(self) -> str:
        return self.urn.rsplit("::", 1)[-1]


@dataclass(frozen=True)
class Flag:
    severity: str
    """error or warning."""
    kind: str
    resource: str
    message: str
    fix: str | None = None


@dataclass(frozen=True)
class BootChange:
    resource: str
    type: str
    applied: bool
    """False when the resource ignores changes to its boot document (it keeps the one it was created with)."""


@dataclass(frozen=True)
class ImageChange:
    """A scale set or VM whose node image version changes between the plans."""

    resource: str
    type: str
    before: str
    after: str
    applies: str
    """How Azure applies it, in words (docs/images.md, "Rolling out a new version")."""


IMAGE_PATHS = {SCALE_SET: "virtualMachineProfile.storageProfile.imageReference.id",
               "azure-native:compute:VirtualMachine": "storageProfile.imageReference.id"}
NEW_INSTANCES_ONLY = ("new and reimaged instances only: the scale set's upgradePolicy is Manual (\"Nothing happens "
                      "automatically to the existing virtual machines when changes occur to the scale set model. New "
                      "instances added to the scale set use the most update-to-date model available\", azure-compute-docs "
                      "articles/virtual-machine-scale-sets/virtual-machine-scale-sets-upgrade-policy.md); roll the pool "
                      "by docs/images.md")
NOT_APPLIED = ("not applied: the member keeps the image it was created with (Azure refuses to change a VM's image, "
               "so the member ignores it); replace members one at a time (docs/operations.md)")


@dataclass
class PlanDiff:
    base: str
    head: str
    changes: list[Change] = field(default_factory=list)
    flags: list[Flag] = field(default_factory=list)
    boot: list[BootChange] = field(default_factory=list)
    images: list[ImageChange] = field(default_factory=list)
    boot_files: dict[str, Any] | None = None
    capacity: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[Flag]:
        return [f for f in self.flags if f.severity == "error"]

    def count(self, action: str) -> int:
        return sum(c.action == action for c in self.changes)

    def as_dict(self) -> dict[str, Any]:
        return {"base": self.base, "head": self.head,
                "summary": {a: self.count(a) for a in ("create", "update", "replace", "delete")}
                | {"errors": len(self.errors), "warnings": len(self.flags) - len(self.errors),
                   "bootDocuments": len(self.boot), "nodeImages": len(self.images)},
                "changes": [asdict(c) | {"name": c.name} for c in self.changes],
                "flags": [asdict(f) for f in self.flags], "boot": [asdict(b) for b in self.boot],
                "images": [asdict(i) for i in self.images],
                "bootFiles": self.boot_files, "capacity": self.capacity, "notes": self.notes}


def _leaves(value: Any, path: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _leaves(item, f"{path}.{key}" if path else key, out)
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            _leaves(item, f"{path}[{index}]", out)
    else:
        out[path] = value


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "[")


def changed_paths(old: dict[str, Any], new: dict[str, Any], ignored: list[str]) -> list[str]:
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    _leaves(old, "", before)
    _leaves(new, "", after)
    return sorted(p for p in set(before) | set(after)
                  if before.get(p, ...) != after.get(p, ...) and not any(_under(p, i) for i in ignored))


def _tags(state: dict[str, Any]) -> dict[str, Any]:
    tags = (state.get("inputs") or {}).get("tags")
    return tags if isinstance(tags, dict) else {}


def _compare(urn: str, old: dict[str, Any], new: dict[str, Any], base: Side, head: Side,
             result: PlanDiff) -> Change | None:
    ignored = [str(i) for i in new.get("ignoreChanges") or []]
    paths = changed_paths(old.get("inputs") or {}, new.get("inputs") or {}, ignored)
    old_digests, new_digests = base.secret_digests.get(urn, {}), head.secret_digests.get(urn, {})
    # A real preview, or a plan from before digests existed, has none: then masked inputs cannot be compared,
    # and a missing digest is no evidence of a change (it would read as replacing every certificate).
    comparable = bool(base.secret_digests) and bool(head.secret_digests)
    secret_changes = sorted(p for p in set(old_digests) | set(new_digests)
                            if comparable and old_digests.get(p) != new_digests.get(p))
    for path in secret_changes:
        if path in BOOT_PATHS:
            result.boot.append(BootChange(urn.rsplit("::", 1)[-1], new["type"],
                                          not any(_under(path, i) for i in ignored)))
    paths = sorted(set(paths) | {p for p in secret_changes if not any(_under(p, i) for i in ignored)})
    if not paths:
        return None
    reasons = tuple(f"{p} ({source})" for p in paths if (source := replacing(new["type"], p)) is not None)
    return Change("replace" if reasons else "update", urn, new["type"], tuple(paths), reasons)


def _acknowledged(head: Side, kind: str) -> list[str] | None:
    """The head stack's acknowledgeDeletions.<kind>, or None when the head is a bare preview (unknown)."""
    if head.summary is None or "acknowledgeDeletions" not in head.summary:
        return None
    return list(head.summary["acknowledgeDeletions"].get(kind) or [])


def _deletion_flag(kind: str, resource: str, what: str, acknowledged: list[str] | None, key: str) -> Flag:
    if acknowledged is not None and any(fnmatchcase(resource, pattern) for pattern in acknowledged):
        return Flag("warning", kind, resource, f"{what} (acknowledged in acknowledgeDeletions.{key})")
    if acknowledged is None:
        return Flag("warning", kind, resource, what, f"acknowledge it under cluster.acknowledgeDeletions.{key}")
    return Flag("error", kind, resource, f"{what}, and the stack does not acknowledge it",
                f"drain it first, then add {resource!r} to cluster.acknowledgeDeletions.{key}")


def _flags(result: PlanDiff, base: Side, head: Side) -> None:
    flags = result.flags
    created: dict[str, list[str]] = defaultdict(list)
    deleted: dict[str, list[str]] = defaultdict(list)
    for change in result.changes:
        old, new = base.resources.get(change.urn), head.resources.get(change.urn)
        state = new or old or {}
        if change.type == SCALE_SET and change.action in ("create", "delete"):
            pool = str(_tags(state).get(POOL_TAG, "?"))
            (created if change.action == "create" else deleted)[pool].append(change.name)
        if change.action in ("delete", "replace") and old and old.get("protect"):
            flags.append(Flag("error", "protected", change.name,
                              f"{change.type} is protected and this change would {change.action} it",
                              "a protected resource is never replaced by a plan; follow docs/operations.md"))
        if change.type == SUBNET and change.action in ("update", "replace") and old and new:
            before, after = (old["inputs"].get("addressPrefix"), new["inputs"].get("addressPrefix"))
            if before != after:
                block = str(new["inputs"].get("subnetName") or change.name)
                flags.append(Flag("error", "moved-block", block,
                                  f"address block moves {before} -> {after}: every NIC in it is replaced",
                                  f"pin it where it is: cluster.network.pinnedBlocks.{block}: {before} "
                                  "(docs/ip-plan.md)"))
        if change.action == "update":
            reported: set[str] = set()
            for path in change.paths:
                refusal = refused(change.type, path)
                if refusal is not None and refusal.prefix not in reported:
                    reported.add(refusal.prefix)  # one line per refused property, however many leaves it has
                    flags.append(Flag("error", "refused-by-azure", change.name, f"{path}: {refusal.why}",
                                      refusal.procedure))
        if change.action in ("update", "replace") and old and new:
            role = _tags(new).get(ROLE_TAG)
            size_path = "sku.name" if change.type == SCALE_SET else "hardwareProfile.vmSize"
            if role in ("apiserver", "etcd", "etcd-events") and size_path in change.paths:
                before = _get(old["inputs"], size_path)
                fix = ("the scale set's manual upgrade policy leaves running API servers as they are: roll them one "
                       "at a time (docs/operations.md, \"Resizing the control plane\")" if role == "apiserver" else
                       "members update one after another (each depends on the one before); check `etcdctl endpoint "
                       "health` between them (docs/operations.md, \"Resizing the control plane\")")
                flags.append(Flag("warning", "control-plane-resize", change.name,
                                  f"{role} resized {before} -> {_get(new['inputs'], size_path)}: the VMs restart", fix))
        if change.action == "delete" and old:
            if change.type == SCALE_SET and _tags(old).get(INFINIBAND_TAG) == "true":
                capacity = (old["inputs"].get("sku") or {}).get("capacity")
                flags.append(_deletion_flag("deleted-infiniband-domain", change.name,
                                            f"InfiniBand domain deleted with its {capacity} VMs and the jobs on them",
                                            _acknowledged(head, "infinibandDomains"), "infinibandDomains"))
            labels = ((old["inputs"].get("metadata") or {}).get("labels") or {})
            if change.type == NAMESPACE and TEAM_LABEL in labels:
                team = str(labels[TEAM_LABEL])
                namespace = (old["inputs"].get("metadata") or {}).get("name", change.name)
                flags.append(_deletion_flag("deleted-team-namespace", team,
                                            f"namespace {namespace} of team {team} is deleted with every workload in it",
                                            _acknowledged(head, "teams"), "teams"))
    for pool in sorted(set(created) & set(deleted)):
        flags.append(Flag("error", "renamed-scale-set", pool,
                          f"pool {pool}: scale sets {', '.join(sorted(deleted[pool]))} are deleted while "
                          f"{', '.join(sorted(created[pool]))} are created: a renamed scale set replaces its VMs",
                          "scale-set names come from (pool, zone, index); keep zones and pools as they were"))
    gone = {p for p in deleted if p not in _pools(head)}
    new_pools = {p for p in created if p not in _pools(base)}
    for old_pool in sorted(gone):
        for new_pool in sorted(new_pools):
            if _pool_sizes(base, old_pool) & _pool_sizes(head, new_pool):
                flags.append(Flag("error", "renamed-scale-set", old_pool,
                                  f"pool {old_pool} disappears while pool {new_pool} of the same VM size appears: "
                                  "renaming a pool deletes and recreates every scale set and VM in it",
                                  f"keep the name {old_pool!r}; to retire the pool on purpose, remove it in one change "
                                  "and add the new one in another"))
    flags.sort(key=lambda f: (f.severity != "error", f.kind, f.resource, f.message))


def _pools(side: Side) -> set[str]:
    return {str(_tags(s).get(POOL_TAG)) for s in side.resources.values() if s.get("type") == SCALE_SET}


def _pool_sizes(side: Side, pool: str) -> set[str]:
    return {str((s["inputs"].get("sku") or {}).get("name")) for s in side.resources.values()
            if s.get("type") == SCALE_SET and str(_tags(s).get(POOL_TAG)) == pool}


def _get(inputs: dict[str, Any], path: str) -> Any:
    current: Any = inputs
    for key in path.split("."):
        current = current.get(key) if isinstance(current, dict) else None
    return current


def _boot_files(base: Side, head: Side, result: PlanDiff) -> None:
    if base.boot is None or head.boot is None:
        missing = [s.label for s in (base, head) if s.boot is None]
        result.notes.append(f"no boot/ folder in {', '.join(missing)}: boot changes are judged from the preview's "
                            "digests only")
        return
    changed = {}
    for name in sorted(set(base.boot) & set(head.boot)):
        if base.boot[name] != head.boot[name]:
            lines = list(difflib.unified_diff(base.boot[name].splitlines(), head.boot[name].splitlines(),
                                              f"base/{name}", f"head/{name}", lineterm="", n=1))
            changed[name] = lines[:MAX_DIFF_LINES] + ([f"... {len(lines) - MAX_DIFF_LINES} more lines"]
                                                     if len(lines) > MAX_DIFF_LINES else [])
    result.boot_files = {"added": sorted(set(head.boot) - set(base.boot)),
                         "removed": sorted(set(base.boot) - set(head.boot)), "changed": changed}


def image_of(state: dict[str, Any]) -> str | None:
    """`<definition> <version>` of a gallery image version id (`.../images/<definition>/versions/<version>`)."""
    path = IMAGE_PATHS.get(str(state.get("type")))
    value = _get(state.get("inputs") or {}, path) if path else None
    if not isinstance(value, str) or "/images/" not in value or "/versions/" not in value:
        return None
    definition, _, version = value.rsplit("/images/", 1)[1].partition("/versions/")
    return f"{definition} {version}"


def _images(base: Side, head: Side, result: PlanDiff) -> None:
    for urn in sorted(set(base.resources) & set(head.resources)):
        old, new = base.resources[urn], head.resources[urn]
        before, after = image_of(old), image_of(new)
        if before is None or after is None or before == after:
            continue
        ignored = [str(i) for i in new.get("ignoreChanges") or []]
        applied = not any(_under(IMAGE_PATHS[new["type"]], i) for i in ignored)
        result.images.append(ImageChange(urn.rsplit("::", 1)[-1], new["type"], before, after,
                                          NEW_INSTANCES_ONLY if applied and new["type"] == SCALE_SET else NOT_APPLIED))


def diff_sides(base: Side, head: Side) -> PlanDiff:
    result = PlanDiff(base.label, head.label)
    for urn in sorted(set(base.resources) | set(head.resources)):
        old, new = base.resources.get(urn), head.resources.get(urn)
        if old is None and new is not None:
            result.changes.append(Change("create", urn, new["type"]))
        elif new is None and old is not None:
            result.changes.append(Change("delete", urn, old["type"]))
        elif old is not None and new is not None:
            change = _compare(urn, old, new, base, head, result)
            if change is not None:
                result.changes.append(change)
    _flags(result, base, head)
    _images(base, head, result)
    _boot_files(base, head, result)
    result.boot.sort(key=lambda b: (b.type, b.resource))
    result.capacity = capacity_delta(base, head)
    if not base.secret_digests or not head.secret_digests:
        result.notes.append("a side without secretDigests (a real pulumi preview): changes to masked boot documents "
                            "cannot be seen there")
    return result
