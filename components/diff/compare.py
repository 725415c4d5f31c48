"""Two plans -> what a change creates, updates, replaces and deletes, and what a reviewer must look at.

Errors are changes that would break running capacity or that Azure refuses (moved address blocks,
renamed scale sets, in-place changes Azure rejects, deleting or replacing a protected resource, unacknowledged
deletion of a team namespace or an InfiniBand domain, a Kubernetes downgrade or skipped minor); warnings are
changes to look at twice (acknowledged deletions, control-plane resizes).
"""

from __future__ import annotations

import difflib
import re
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from gpucluster.azure.scale_set.routes import PROVIDER_INPUT, REPLACEMENT_ACK_INPUT
from gpucluster.diff.capacity import capacity_delta
from gpucluster.diff.cost import cost_delta
from gpucluster.diff.metrics import metrics_delta
from gpucluster.diff.replacement import refused, replacements
from gpucluster.diff.rollout import rollout_delta
from gpucluster.diff.sides import Side
from gpucluster.diff.values import ABSENT, JSON_VALUES, ValueChange
from gpucluster.diff.versions import version_flags
from gpucluster.policies.rules.props import DYNAMIC_RESOURCE, SCALE_SET, resource_kind
from gpucluster.policies.rules.replacements import Replaced, acknowledges, judge
from gpucluster.results import Severity
from gpucluster.vocabulary import INFINIBAND_TAG, LABEL_TEAM, POOL_TAG, ROLE_TAG

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
    values: tuple[ValueChange, ...] = ()
    """Old -> new of each changed path (updates and replacements)."""

    @property
    def name(self) -> str:
        return self.urn.rsplit("::", 1)[-1]

    def as_dict(self) -> dict[str, Any]:
        shown = [v.as_dict() for v in self.values[:JSON_VALUES]]
        omitted = max(0, len(self.values) - JSON_VALUES)
        return {"action": self.action, "urn": self.urn, "type": self.type, "name": self.name,
                "paths": list(self.paths), "replace_reasons": list(self.replace_reasons), "values": shown} | (
                    {"valuesOmitted": omitted} if omitted else {})


@dataclass(frozen=True)
class Flag:
    """What a reviewer must look at in a change, in the vocabulary of components/results.py."""

    severity: Severity
    """ERROR: the change is refused (`plan --base` exits 2); WARNING: look at it twice."""
    source: str
    """The kind of change (`moved-block`, `renamed-scale-set`, ...)."""
    path: str
    """The resource, pool, block or team it is about."""
    message: str
    fix: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The diff's JSON row."""
        return {"severity": self.severity.value, "kind": self.source, "resource": self.path, "message": self.message,
                "fix": self.fix or None}


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
    cost: dict[str, Any] | None = None
    """USD per hour and per month, base -> head, in total and per pool (components/diff/cost.py)."""
    metrics: dict[str, Any] | None = None
    """The telemetry budget's figures, base -> head, when it changes (components/diff/metrics.py)."""
    rollout: dict[str, Any] | None = None
    """The machines whose instances need re-imaging and the head plan's waves that do it (components/diff/rollout.py)."""
    notes: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[Flag]:
        return [f for f in self.flags if f.severity is Severity.ERROR]

    def count(self, action: str) -> int:
        return sum(c.action == action for c in self.changes)

    def as_dict(self) -> dict[str, Any]:
        return {"base": self.base, "head": self.head,
                "summary": {a: self.count(a) for a in ("create", "update", "replace", "delete")}
                | {"errors": len(self.errors), "warnings": len(self.flags) - len(self.errors),
                   "bootDocuments": len(self.boot), "nodeImages": len(self.images)},
                "changes": [c.as_dict() for c in self.changes],
                "flags": [f.as_dict() for f in self.flags], "boot": [asdict(b) for b in self.boot],
                "images": [asdict(i) for i in self.images],
                "bootFiles": self.boot_files, "capacity": self.capacity, "cost": self.cost,
                "metrics": self.metrics, "rollout": self.rollout,
                "notes": self.notes}


MAX_CHANGED_PATHS = 1_000
"""Changed input paths listed per resource; a real change touches a few. Past it the list stops (the walk too),
so two large documents that differ everywhere cost what 1,000 paths cost, not a path string per value."""
_MISSING = object()


def _path(parts: list[str | int]) -> str:
    path = ""
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else str(part)
    return path


def changed_paths(old: dict[str, Any], new: dict[str, Any], ignored: list[str]) -> list[str]:
    """Leaf paths (`a.b[0].c`) whose values differ between `old` and `new`, outside the `ignored` paths."""
    return sorted(changed_values(old, new, ignored))


def changed_values(old: dict[str, Any], new: dict[str, Any], ignored: list[str]) -> dict[str, tuple[Any, Any]]:
    """Leaf path (`a.b[0].c`) -> (old, new) for the values that differ between `old` and `new` (ABSENT on the side
    without one), outside the `ignored` paths (and all below them). Both are walked side by side and a path string
    is built only for what differs, or for a node as shallow as an ignored path (the reader bounded the depth); an
    empty object or list is a value."""
    skip = set(ignored)
    skip_depth = max((len(re.findall(r"[.\[]", i)) + 1 for i in skip), default=0)
    found: dict[str, tuple[Any, Any]] = {}
    parts: list[str | int] = []

    def skipped() -> bool:
        return len(found) >= MAX_CHANGED_PATHS or (0 < len(parts) <= skip_depth and _path(parts) in skip)

    def one_side(value: Any, old_side: bool) -> None:
        if skipped():
            return
        if isinstance(value, dict | list) and value:
            for key, item in value.items() if isinstance(value, dict) else enumerate(value):
                parts.append(key)
                one_side(item, old_side)
                parts.pop()
        elif value is not _MISSING:
            found[_path(parts)] = (value, ABSENT) if old_side else (ABSENT, value)

    def walk(before: Any, after: Any) -> None:
        if skipped() or (before is not _MISSING and after is not _MISSING and before == after):
            return
        if isinstance(before, dict) and isinstance(after, dict) and before and after:
            pairs: Any = ((key, before.get(key, _MISSING), after.get(key, _MISSING))
                          for key in sorted(set(before) | set(after), key=str))
        elif isinstance(before, list) and isinstance(after, list) and before and after:
            pairs = ((index, before[index] if index < len(before) else _MISSING,
                      after[index] if index < len(after) else _MISSING)
                     for index in range(max(len(before), len(after))))
        else:
            if _is_leaf(before) and _is_leaf(after):
                if before is _MISSING or after is _MISSING or before != after:
                    found[_path(parts)] = (ABSENT if before is _MISSING else before,
                                           ABSENT if after is _MISSING else after)
            elif before != after:  # an object or list on one side only: each side's leaves
                one_side(before, True)
                one_side(after, False)
            return
        for key, old_item, new_item in pairs:
            parts.append(key)
            walk(old_item, new_item)
            parts.pop()

    walk(old, new)
    return found


def _is_leaf(value: Any) -> bool:
    return not (isinstance(value, dict | list) and value)


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "[")


def _tags(state: dict[str, Any]) -> dict[str, Any]:
    tags = (state.get("inputs") or {}).get("tags")
    return tags if isinstance(tags, dict) else {}


def _kind(state: dict[str, Any]) -> str:
    """The type a state is judged as (node scale sets' dynamic resources read as the typed scale set)."""
    return resource_kind(str(state.get("type", "")), state.get("inputs") or {})


def _compare(urn: str, old: dict[str, Any], new: dict[str, Any], base: Side, head: Side,
             result: PlanDiff, old_urn: str | None = None) -> Change | None:
    # The serialized dynamic provider is code, not the resource, and the replacement acknowledgement is the stack's
    # word to the provider (the diff reads it from acknowledgeDeletions): never a change.
    ignored = [str(i) for i in new.get("ignoreChanges") or []] + [PROVIDER_INPUT, REPLACEMENT_ACK_INPUT]
    changed = changed_values(old.get("inputs") or {}, new.get("inputs") or {}, ignored)
    paths = sorted(changed)
    old_digests, new_digests = base.secret_digests.get(old_urn or urn, {}), head.secret_digests.get(urn, {})
    # A real preview, or a plan from before digests existed, has none: then masked inputs cannot be compared,
    # and a missing digest is no evidence of a change (it would read as replacing every certificate).
    comparable = bool(base.secret_digests) and bool(head.secret_digests)
    secret_changes = sorted(p for p in set(old_digests) | set(new_digests)
                            if comparable and old_digests.get(p) != new_digests.get(p))
    for path in secret_changes:
        if path in BOOT_PATHS:
            result.boot.append(BootChange(urn.rsplit("::", 1)[-1], _kind(new),
                                          not any(_under(path, i) for i in ignored)))
    paths = sorted(set(paths) | {p for p in secret_changes if not any(_under(p, i) for i in ignored)})
    if not paths:
        return None
    reasons = tuple(f"{p} ({source})" for p, source in replacements(new["type"], paths, old.get("inputs") or {},
                                                                     new.get("inputs") or {}))
    for path in secret_changes:  # a masked value that reads the same on both sides, changed by its digest
        if path not in changed:
            changed[path] = (_masked(old.get("inputs") or {}, path), _masked(new.get("inputs") or {}, path))
    values = tuple(ValueChange(p, *changed.get(p, (ABSENT, ABSENT)), p in secret_changes) for p in paths)
    return Change("replace" if reasons else "update", urn, _kind(new), tuple(paths), reasons, values)


def _acknowledged(head: Side, kind: str) -> list[str] | None:
    """The head stack's acknowledgeDeletions.<kind>, or None when the head is a bare preview (unknown)."""
    if head.summary is None or "acknowledgeDeletions" not in head.summary:
        return None
    return list(head.summary["acknowledgeDeletions"].get(kind) or [])


def _deletion_flag(kind: str, resource: str, what: str, acknowledged: list[str] | None, key: str) -> Flag:
    if acknowledged is not None and acknowledges(acknowledged, resource):
        return Flag(Severity.WARNING, kind, resource, f"{what} (acknowledged in acknowledgeDeletions.{key})")
    if acknowledged is None:
        return Flag(Severity.WARNING, kind, resource, what, f"acknowledge it under cluster.acknowledgeDeletions.{key}")
    return Flag(Severity.ERROR, kind, resource, f"{what}, and the stack does not acknowledge it",
                f"drain it first, then add {resource!r} to cluster.acknowledgeDeletions.{key}")


def _flags(result: PlanDiff, base: Side, head: Side, moved: dict[str, str]) -> None:
    flags = result.flags
    created: dict[str, list[str]] = defaultdict(list)
    deleted: dict[str, list[str]] = defaultdict(list)
    for change in result.changes:
        old, new = base.resources.get(moved.get(change.urn, change.urn)), head.resources.get(change.urn)
        state = new or old or {}
        if change.type == SCALE_SET and change.action in ("create", "delete"):
            pool = str(_tags(state).get(POOL_TAG, "?"))
            (created if change.action == "create" else deleted)[pool].append(change.name)
        # The engine refuses to delete a resource its last `up` protected, and to replace one the program still
        # protects (pulumi/pulumi step.go DeleteStep.Apply, step_generator.go: unprotect and replace may share an
        # update, a delete reads the old state's flag).
        if old and old.get("protect") and (change.action == "delete" or (
                change.action == "replace" and (new is None or new.get("protect")))):
            fix = ("acknowledge it in cluster.acknowledgeDeletions.infinibandDomains and run `pulumi up` while the "
                   "stack still declares it (that lifts its protection), then remove it (docs/operations.md, "
                   "\"Acknowledging a deletion\")" if change.type == SCALE_SET and change.action == "delete"
                   else "a protected resource is never replaced by a plan; follow docs/operations.md")
            flags.append(Flag(Severity.ERROR, "protected", change.name,
                              f"{change.type} is protected and this change would {change.action} it", fix))
        if change.type == SUBNET and change.action in ("update", "replace") and old and new:
            before, after = (old["inputs"].get("addressPrefix"), new["inputs"].get("addressPrefix"))
            if before != after:
                block = str(new["inputs"].get("subnetName") or change.name)
                flags.append(Flag(Severity.ERROR, "moved-block", block,
                                  f"address block moves {before} -> {after}: every NIC in it is replaced",
                                  f"pin it where it is: cluster.network.pinnedBlocks.{block}: {before} "
                                  "(docs/ip-plan.md)"))
        if change.action == "update":
            reported: set[str] = set()
            for path in change.paths:
                refusal = refused(change.type, path)
                if refusal is not None and refusal.prefix not in reported:
                    reported.add(refusal.prefix)  # one line per refused property, however many leaves it has
                    flags.append(Flag(Severity.ERROR, "refused-by-azure", change.name, f"{path}: {refusal.why}",
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
                flags.append(Flag(Severity.WARNING, "control-plane-resize", change.name,
                                  f"{role} resized {before} -> {_get(new['inputs'], size_path)}: the VMs restart", fix))
        if change.type == SCALE_SET and change.action == "update" and "sku.name" in change.paths and old and new:
            # Where the provider changes the size in place: the scale-set model changes, running VMs do not.
            flags.append(Flag(Severity.WARNING, "resized-in-place", change.name,
                              f"VM size {_get(old['inputs'], 'sku.name')} -> {_get(new['inputs'], 'sku.name')} in "
                              "place: new VMs get it; running ones keep theirs until updated (upgrade policy manual)",
                              f"drain and update one InfiniBand domain at a time: az vmss update-instances --name "
                              f"{change.name} --instance-ids '*' (docs/operations.md, \"Changing a pool's VM size\")"))
        if change.action == "delete" and old:
            if change.type == SCALE_SET and _tags(old).get(INFINIBAND_TAG) == "true":
                capacity = _get(old["inputs"], "sku.capacity")
                flags.append(_deletion_flag("deleted-infiniband-domain", change.name,
                                            f"InfiniBand domain deleted with its {capacity} VMs and the jobs on them",
                                            _acknowledged(head, "infinibandDomains"), "infinibandDomains"))
            labels = _get(old["inputs"], "metadata.labels") or {}
            if change.type == NAMESPACE and isinstance(labels, dict) and LABEL_TEAM in labels:
                team = str(labels[LABEL_TEAM])
                namespace = _get(old["inputs"], "metadata.name") or change.name
                flags.append(_deletion_flag("deleted-team-namespace", team,
                                            f"namespace {namespace} of team {team} is deleted with every workload in it",
                                            _acknowledged(head, "teams"), "teams"))
    flags.extend(Flag(Severity(f.severity), "replaced-infiniband-domain", f.path, f.message, f.fix)
                 for f in judge(_replaced_scale_sets(result, base, moved), _acknowledged(head, "infinibandDomains")))
    for pool in sorted(set(created) & set(deleted)):
        flags.append(Flag(Severity.ERROR, "renamed-scale-set", pool,
                          f"pool {pool}: scale sets {', '.join(sorted(deleted[pool]))} are deleted while "
                          f"{', '.join(sorted(created[pool]))} are created: a renamed scale set replaces its VMs",
                          "scale-set names come from (pool, zone, index); keep zones and pools as they were"))
    head_pools, base_pools = _pool_sizes(head), _pool_sizes(base)
    new_by_size: dict[str, set[str]] = defaultdict(set)  # size -> pools that appear with it: no pool x pool loop
    for pool in (p for p in created if p not in base_pools):
        for size in head_pools.get(pool, set()):
            new_by_size[size].add(pool)
    for old_pool in sorted(p for p in deleted if p not in head_pools):
        twins = sorted(set().union(*(new_by_size.get(size, set()) for size in base_pools.get(old_pool, set()))))
        if twins:
            shown = ", ".join(twins[:5]) + (f" and {len(twins) - 5} more" if len(twins) > 5 else "")
            flags.append(Flag(Severity.ERROR, "renamed-scale-set", old_pool,
                              f"pool {old_pool} disappears while pool {shown} of the same VM size appears: "
                              "renaming a pool deletes and recreates every scale set and VM in it",
                              f"keep the name {old_pool!r}; to retire the pool on purpose, remove it in one change "
                              "and add the new one in another"))
    flags.extend(Flag(Severity.ERROR, "kubernetes-version", resource, message, fix)
                 for resource, message, fix in version_flags(base, head))
    flags.sort(key=lambda f: (f.severity is not Severity.ERROR, f.source, f.path, f.message))


def _replaced_scale_sets(result: PlanDiff, base: Side, moved: dict[str, str]) -> list[Replaced]:
    found = []
    for change in result.changes:
        old = base.resources.get(moved.get(change.urn, change.urn))
        if change.type != SCALE_SET or change.action != "replace" or old is None:
            continue
        new = next((v.new for v in change.values if v.path == "sku.name"), _get(old["inputs"], "sku.name"))
        found.append(Replaced(change.name, _tags(old), _get(old["inputs"], "sku.name"), new,
                              _get(old["inputs"], "sku.capacity"),
                              "replaced by " + ", ".join(dict.fromkeys(r.split(" (", 1)[0] for r in change.replace_reasons))))
    return found


def _pool_sizes(side: Side) -> dict[str, set[str]]:
    """Pool -> the VM sizes of its scale sets, in one pass over the side (not one per pool)."""
    sizes: dict[str, set[str]] = defaultdict(set)
    for state in side.resources.values():
        if _kind(state) == SCALE_SET:
            sizes[str(_tags(state).get(POOL_TAG))].add(str(_get(state["inputs"], "sku.name")))
    return sizes


def _masked(inputs: dict[str, Any], path: str) -> Any:
    value = _get(inputs, path)
    return ABSENT if value is None else value


def _get(inputs: dict[str, Any], path: str) -> Any:
    current: Any = inputs
    for key in path.split("."):
        current = current.get(key) if isinstance(current, dict) else None
    return current


ETCD_SIZING = (("etcd", "etcd"), ("eventsEtcd", "etcd-events"))
"""summary.json's control-plane keys and the members' names: etcd's sizing, rendered into each member's boot
document (components/bootstrap/etcd.py: `--quota-backend-bytes` in /usr/local/sbin/gpucluster-etcd-run)."""


def running_sizing_flags(base: dict[str, Any] | None, head: dict[str, Any] | None) -> list[Flag]:
    """A sizing input of running machines that moves: etcd's backend quota follows the pools' size, but a member
    reads its boot document once, at its first boot, and `pulumi up` never replaces a protected member, so the new
    value reaches no running member unless rolled by hand."""
    flags = []
    for key, members in ETCD_SIZING:
        old, new = (((s or {}).get("controlPlane") or {}).get(key) or {} for s in (base, head))
        before, after = old.get("quotaBackendGib"), new.get("quotaBackendGib")
        if before is None or after is None or before == after:
            continue
        flags.append(Flag(
            Severity.WARNING, "etcd-quota-not-applied", f"{members} members",
            f"--quota-backend-bytes moves from {before:g} to {after:g} GiB in the {members} members' boot documents "
            "(the sizing model follows the pools' size); running members read their boot document only at first "
            "boot, so they keep the old quota",
            f"roll it one member at a time, the leader last: set --quota-backend-bytes={int(after * 2**30)} in "
            "/usr/local/sbin/gpucluster-etcd-run, `systemctl restart etcd`, and wait for `etcdctl endpoint health "
            "--cluster` before the next (docs/operations.md, \"Quota and defragmentation\")"))
    return flags


def _boot_files(base: Side, head: Side, result: PlanDiff) -> None:
    if base.boot is None or head.boot is None:
        missing = [s.label for s in (base, head) if s.boot is None]
        result.notes.append(f"no boot/ folder in {', '.join(missing)}: boot changes are judged from the preview's "
                            "digests only")
        return
    changed = {}
    for name in sorted(set(base.boot) & set(head.boot)):
        if base.boot[name] != head.boot[name]:
            # split at newlines only: a CR, NEL or U+2028 stays in its line, where the terminal shows it escaped
            lines = list(difflib.unified_diff(base.boot[name].split("\n"), head.boot[name].split("\n"),
                                              f"base/{name}", f"head/{name}", lineterm="", n=1))
            changed[name] = lines[:MAX_DIFF_LINES] + ([f"... {len(lines) - MAX_DIFF_LINES} more lines"]
                                                     if len(lines) > MAX_DIFF_LINES else [])
    result.boot_files = {"added": sorted(set(head.boot) - set(base.boot)),
                         "removed": sorted(set(base.boot) - set(head.boot)), "changed": changed}


def _moved(base: Side, head: Side) -> dict[str, str]:
    """head URN -> base URN for node scale sets that moved from azure-native's typed class to the dynamic route:
    NodeScaleSet declares `aliases` with the typed type (components/azure/scale_set/resource.py), so the engine takes
    the old resource as this one."""
    moved = {}
    for urn, state in head.resources.items():
        old_urn = urn.replace(f"${DYNAMIC_RESOURCE}::", f"${SCALE_SET}::")
        if state.get("type") == DYNAMIC_RESOURCE and _kind(state) == SCALE_SET and urn not in base.resources \
                and old_urn in base.resources and old_urn not in head.resources:
            moved[urn] = old_urn
    return moved


def image_of(state: dict[str, Any]) -> str | None:
    """`<definition> <version>` of a gallery image version id (`.../images/<definition>/versions/<version>`)."""
    path = IMAGE_PATHS.get(_kind(state))
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
        applied = not any(_under(IMAGE_PATHS[_kind(new)], i) for i in ignored)
        result.images.append(ImageChange(urn.rsplit("::", 1)[-1], _kind(new), before, after,
                                          NEW_INSTANCES_ONLY if applied and _kind(new) == SCALE_SET else NOT_APPLIED))


def _reimage_reasons(result: PlanDiff) -> dict[str, list[str]]:
    """Resource name -> why its instances need re-imaging: a new node image version, a changed boot document."""
    reasons: dict[str, list[str]] = defaultdict(list)
    for image in result.images:
        reasons[image.resource].append(f"node image {image.before} -> {image.after}")
    for boot in result.boot:
        reasons[boot.resource].append("boot document")
    return dict(reasons)


def diff_sides(base: Side, head: Side) -> PlanDiff:
    result = PlanDiff(base.label, head.label)
    moved = _moved(base, head)
    if moved:
        result.notes.append(f"{len(moved)} scale sets move from azure-native's typed class to the capacity-free route "
                            "(an `aliases` move: the same Azure resources, updated in place)")
    for urn in sorted((set(base.resources) - set(moved.values())) | set(head.resources)):
        old, new = base.resources.get(moved.get(urn, urn)), head.resources.get(urn)
        if old is None and new is not None:
            result.changes.append(Change("create", urn, _kind(new)))
        elif new is None and old is not None:
            result.changes.append(Change("delete", urn, _kind(old)))
        elif old is not None and new is not None:
            change = _compare(urn, old, new, base, head, result, moved.get(urn))
            if change is not None:
                result.changes.append(change)
    result.flags.extend(running_sizing_flags(base.summary, head.summary))
    _flags(result, base, head, moved)  # sorts every flag
    _images(base, head, result)
    _boot_files(base, head, result)
    result.boot.sort(key=lambda b: (b.type, b.resource))
    result.capacity = capacity_delta(base, head)
    result.cost = cost_delta(base, head)
    result.metrics = metrics_delta(base, head)
    result.rollout = rollout_delta(head, _reimage_reasons(result))
    if not base.secret_digests or not head.secret_digests:
        result.notes.append("a side without secretDigests (a real pulumi preview): changes to masked boot documents "
                            "cannot be seen there")
    return result
