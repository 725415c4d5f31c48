"""Which policy-pack config judges a stack, and reading it.

The config comes from what the user names, never from the document being judged: `--policy-config FILE`, else
the stack's own file. A stack names it with the config key `gpucluster:policyConfig` (a path under
policies/config/), so a stack file copied under another name keeps its config; without the key,
policies/config/<stack>.json when it exists; else none, and every rule runs at its defaults (the strictest).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

from gpucluster.errors import SpecError
from gpucluster.input_files import KIB, load_json, read_bounded
from gpucluster.spec.loader import POLICY_CONFIG_KEY

CONFIG_FOLDER = PurePosixPath("policies", "config")
MAX_POLICY_CONFIG_BYTES = 64 * KIB
"""A config setting every rule of the pack is about 2 KB; dev's is 130 bytes."""
WHAT = "policy config (JSON, as for `pulumi preview --policy-pack-config`)"


def read_policy_config(path: Path) -> dict[str, Any]:
    """The pack config in `path`, checked against the rules' schemas as the CLI checks it (exit 2 otherwise)."""
    from gpucluster.offline.policy_runner import check_config

    where = str(path)
    config = load_json(read_bounded(path, MAX_POLICY_CONFIG_BYTES, WHAT), where, WHAT)
    if not isinstance(config, dict):
        raise SpecError.at(where, "the policy config must be a JSON object of policy name -> settings")
    check_config(config, where)
    return config


def named_policy_config(stack_config: dict[str, Any], root: Path) -> Path | None:
    """The file `gpucluster:policyConfig` names, checked to be a .json file inside the project's policies/config/."""
    if POLICY_CONFIG_KEY not in stack_config:
        return None
    where = f"config.{POLICY_CONFIG_KEY}"
    value = stack_config[POLICY_CONFIG_KEY]
    fix = f"give a path such as {CONFIG_FOLDER}/<stack>.json, relative to the project"
    if not isinstance(value, str) or not value:
        raise SpecError.at(where, f"must be a path (text); {fix}")
    relative = PurePosixPath(value)
    if (relative.is_absolute() or ".." in relative.parts or relative.parent != CONFIG_FOLDER
            or relative.suffix != ".json"):
        raise SpecError.at(where, f"{value[:200]!r} is not a .json file directly in {CONFIG_FOLDER}/; {fix}")
    folder = (root / CONFIG_FOLDER).resolve()
    path = (root / relative).resolve()
    if path.parent != folder:  # a link pointing out of the folder
        raise SpecError.at(where, f"{value!r} leads out of {CONFIG_FOLDER}/ (a link?); {fix}")
    if not path.is_file():
        raise SpecError.at(where, f"{value!r}: no such file in {CONFIG_FOLDER}/; {fix}")
    return root / relative


def stack_policy_config(stack_config: dict[str, Any], name: str, root: Path) -> Path | None:
    """The stack's policy config: the file its `gpucluster:policyConfig` names, else policies/config/<name>.json
    when it exists, else None (the pack's defaults)."""
    named = named_policy_config(stack_config, root)
    if named is not None:
        return named
    fallback = root / CONFIG_FOLDER / f"{name}.json"
    return fallback if fallback.is_file() else None
