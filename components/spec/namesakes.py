"""Stack files that name the same cluster: a stack file copied to make a new stack keeps `cluster.name`, and the
cluster's name is what names its resource group (`gpucluster-<name>`), its VNet and its scale sets. Two such stacks
deploy into one resource group, each taking the other's resources for its own. `gpucluster plan` and the program warn,
naming the other file and the key to change."""

from __future__ import annotations

from pathlib import Path

from gpucluster.errors import SpecError
from gpucluster.spec.loader import CONFIG_KEY, read_stack_config


def cluster_name(path: Path) -> str | None:
    """The `name` under the stack file's cluster key, read as `plan` reads a stack file (bounded, checked); None for
    a file that does not read as one (its own plan says why)."""
    try:
        cluster = read_stack_config(path)[CONFIG_KEY]
    except (SpecError, OSError):
        return None
    name = cluster.get("name") if isinstance(cluster, dict) else None
    return name if isinstance(name, str) else None


def namesakes(stack_file: Path, name: str) -> list[Path]:
    """The other `Pulumi.<stack>.yaml` files beside `stack_file` whose cluster is also called `name`."""
    siblings = sorted(stack_file.parent.glob("Pulumi.*.yaml"))
    return [p for p in siblings if p.resolve() != stack_file.resolve() and cluster_name(p) == name]


def namesake_warning(stack_file: Path, name: str) -> str | None:
    found = namesakes(stack_file, name)
    if not found:
        return None
    others = str(found[0]) + (f" and {len(found) - 1} more" if len(found) > 1 else "")
    return (f"warning: cluster.name `{name}` in {stack_file} is also the cluster name in {others}: both stacks deploy "
            f"into resource group gpucluster-{name} and take each other's resources; give this stack a name of its "
            f"own under cluster.name")
