"""Read a Pulumi stack file and validate `gpucluster:cluster` into a ClusterSpec."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gpucluster.errors import Problem, SpecError
from gpucluster.input_files import read_bounded
from gpucluster.spec.cluster import ClusterSpec
from gpucluster.spec.config_values import config_value_problems
from gpucluster.spec.errors import problems_from
from gpucluster.spec.network import existing_vnet_subscription_problem
from gpucluster.spec.registry_name import SUBSCRIPTION_ENV, naming_subscription, with_registry_name
from gpucluster.spec.stack_names import check_stack_name
from gpucluster.spec.yaml_text import MAX_BYTES, MAX_DEPTH, check_size, load_yaml

CONFIG_KEY = "gpucluster:cluster"
POLICY_CONFIG_KEY = "gpucluster:policyConfig"
"""The stack's policy-pack config file, relative to the project (policies/config/<file>.json)."""


@dataclass(frozen=True)
class StackFile:
    """A stack file as the engine needs it: its name, every config value, and the validated spec."""

    name: str
    path: Path
    config: dict[str, Any]
    spec: ClusterSpec


def parse_cluster(raw: Any) -> ClusterSpec:
    """Validate the structured config value; every problem is reported at its YAML path."""
    if not isinstance(raw, dict):
        raise SpecError.at("cluster", f"must be a mapping of keys to values (got {type(raw).__name__})")
    try:
        return ClusterSpec.model_validate(raw)
    except ValidationError as error:
        raise SpecError(problems_from(error, ClusterSpec)) from None


def resolve_stack_path(stack: str, stacks_dir: Path) -> tuple[str, Path]:
    """A stack name (`prod`) or a path to a stack file -> (stack name, file path). The name must be one
    Pulumi takes and no folder (`.`, `..`): it names files and the output folder."""
    candidate = Path(stack)
    if candidate.suffix in (".yaml", ".yml") or candidate.parent != Path("."):
        name = candidate.stem.removeprefix("Pulumi.")
        return check_stack_name(name, f"{stack} (the stack name is the file name's `Pulumi.<name>.yaml`)"), candidate
    return check_stack_name(stack, "stack"), stacks_dir / f"Pulumi.{stack}.yaml"


def load_stack_file(path: Path, name: str, subscription: str = "") -> StackFile:
    """The stack file, validated; its registry named from the stack's subscription, else `subscription`, else
    AZURE_SUBSCRIPTION_ID (components/spec/registry_name.py)."""
    config = read_stack_config(path)
    raw = config[CONFIG_KEY]
    if isinstance(raw, str):
        raw = _json_text(raw, str(path))
    _reject_secrets(raw, "cluster")
    return StackFile(name=name, path=path, config=config, spec=named_cluster(raw, config, subscription))


def read_stack_config(path: Path) -> dict[str, Any]:
    """The stack file's `config:` mapping, its values checked as the engine reads them, the cluster not yet parsed."""
    if not path.exists():
        raise SpecError.at(str(path), "stack file not found; pass a stack name under stacks/ or a path to a stack file")
    document = load_yaml(read_bounded(path, MAX_BYTES, "stack file"), str(path))
    if document is None:
        raise SpecError.at(str(path), f"the file is empty; it needs `config: {{{CONFIG_KEY}: ...}}`")
    if not isinstance(document, dict) or not isinstance(document.get("config"), dict):
        raise SpecError.at(str(path), "needs a top-level `config:` mapping, as `pulumi config set` writes it")
    config: dict[str, Any] = document["config"]
    if CONFIG_KEY not in config:
        raise SpecError.at("cluster", f"missing: add the structured key `{CONFIG_KEY}` under `config:` in {path}")
    problems = config_value_problems(config, skip=CONFIG_KEY)
    if problems:
        raise SpecError(problems)
    return config


def named_cluster(raw: Any, config: Mapping[str, Any], subscription: str = "") -> ClusterSpec:
    """parse_cluster, with the registry named from the stack's subscription (components/spec/registry_name.py): what
    `gpucluster plan` and the program under the engine both plan. `subscription` (verify's --subscription) comes
    before AZURE_SUBSCRIPTION_ID."""
    environ = {**os.environ, SUBSCRIPTION_ENV: subscription} if subscription else None
    deploys_to = naming_subscription(config, environ)[0]
    spec = parse_cluster(raw)
    if problem := existing_vnet_subscription_problem(spec.network, deploys_to):
        raise SpecError.at("cluster.network.existingVnet.id", problem)
    return with_registry_name(spec, deploys_to)


def _json_text(text: str, where: str) -> Any:
    """`pulumi config set gpucluster:cluster '{...}'` (without --path) stores the object as a JSON string, and
    the program's `Config.require_object` reads it with json.loads (pulumi/config.py): read it the same way."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise SpecError.at("cluster", f"is text, not a mapping, and not JSON either ({error.msg} at character "
                                      f"{error.pos}); write the keys under `{CONFIG_KEY}:` as YAML, or give "
                                      "valid JSON") from None
    except RecursionError:
        raise SpecError.at("cluster", f"its JSON is nested more than {MAX_DEPTH} levels deep") from None
    check_size(value, where)
    return value


def _reject_secrets(value: Any, path: str) -> None:
    """The cluster spec holds no secrets: keys and tokens are generated as Pulumi secrets instead."""
    if isinstance(value, dict):
        if set(value) == {"secure"}:
            raise SpecError([Problem(path, "holds an encrypted value; the cluster spec takes no secrets, remove it")])
        for key, item in value.items():
            _reject_secrets(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _reject_secrets(item, f"{path}[{index}]")
