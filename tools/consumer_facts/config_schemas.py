"""The JSON fields of a configuration file's Go structs (a kind like KubeletConfiguration), with the external types
its fields use read from their own repositories at the versions its go.mod pins."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.consumer_facts.go_source import go_mod_version, go_structs
from tools.consumer_facts.mirrors import commit_of, git, mirror, nearest_tag


@dataclass(frozen=True)
class External:
    repo: str
    module: str
    path: str
    qualifier: str
    """The import alias the main file uses (`metav1.`)."""


@dataclass(frozen=True)
class ConfigSchema:
    name: str
    api_version: str
    kind: str
    repo: str
    tag: str
    path: str
    externals: tuple[External, ...]
    why: str


def extract_config_schema(mirrors: Path, schema: ConfigSchema) -> dict[str, Any]:
    repo_dir = mirror(mirrors, schema.repo)
    tag = nearest_tag(repo_dir, schema.tag)
    commit = commit_of(repo_dir, tag)
    go_mod = git(repo_dir, "show", f"{commit}:go.mod")
    structs = go_structs(git(repo_dir, "show", f"{commit}:{schema.path}"))
    if schema.kind not in structs:
        raise SystemExit(f"{schema.repo} {tag} {schema.path}: no struct {schema.kind}")
    sources = [{"repo": schema.repo, "tag": tag, **({"wanted": schema.tag} if schema.tag != tag else {}),
                "commit": commit, "path": schema.path}]
    for ext in schema.externals:
        ext_dir = mirror(mirrors, ext.repo)
        wanted = go_mod_version(go_mod, ext.module)
        used = nearest_tag(ext_dir, wanted)
        ext_commit = commit_of(ext_dir, used)
        structs.update(go_structs(git(ext_dir, "show", f"{ext_commit}:{ext.path}"), ext.qualifier))
        sources.append({"repo": ext.repo, "tag": used, **({"wanted": wanted} if wanted != used else {}),
                        "commit": ext_commit, "path": ext.path})
    return {"name": schema.name, "apiVersion": schema.api_version, "root": schema.kind, "why": schema.why,
            "structs": dict(sorted(structs.items())), "sources": sources}
