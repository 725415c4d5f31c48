"""A consumer's command-line flags: the Go files that register them, read at the pinned tags."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.consumer_facts.go_source import go_flags, go_mod_version, normalized
from tools.consumer_facts.mirrors import commit_of, git, mirror, nearest_tag


@dataclass(frozen=True)
class Source:
    repo: str
    ref: str
    """A tag, or `gomod:<module>`: the version of that module in the consumer's first source's go.mod."""
    paths: tuple[str, ...]
    why: str


@dataclass(frozen=True)
class FlagConsumer:
    name: str
    version: str
    sources: tuple[Source, ...]
    go_mod: str = ""
    """go.mod of the first source, for `gomod:` refs."""


def extract_flags(mirrors: Path, consumer: FlagConsumer) -> dict[str, Any]:
    first = consumer.sources[0]
    go_mod = git(mirror(mirrors, first.repo), "show", f"{first.ref}:{consumer.go_mod}") if consumer.go_mod else ""
    read, flags = [], set()
    for source in consumer.sources:
        repo_dir = mirror(mirrors, source.repo)
        wanted = (go_mod_version(go_mod, source.ref.removeprefix("gomod:")) if source.ref.startswith("gomod:")
                  else source.ref)
        tag = nearest_tag(repo_dir, wanted)
        commit = commit_of(repo_dir, tag)
        from_source = 0
        for path in source.paths:
            found = go_flags(git(repo_dir, "show", f"{commit}:{path}"))
            from_source += len(found)
            flags |= {normalized(f) for f in found}
            read.append({"repo": source.repo, "tag": tag, **({"wanted": wanted} if wanted != tag else {}),
                         "commit": commit, "path": path, "why": source.why, "flags": len(found)})
        if not from_source:
            raise SystemExit(f"{source.repo} {tag} {source.paths}: no flag definitions found")
    return {"consumer": consumer.name, "version": consumer.version, "sources": read, "flags": sorted(flags)}


def ccm_controllers(mirrors: Path, go_mod: str) -> dict[str, Any]:
    """The names `--controllers` accepts in cloud-provider-azure's cloud-controller-manager: the keys of
    newControllerInitializers (cmd/cloud-controller-manager/app/controllermanager.go), with k8s.io/cloud-provider's
    names/controller_names.go constants resolved, and that file's CCMControllerAliases (generic.go replaces an
    alias by its canonical name before checking)."""
    azure = mirror(mirrors, "kubernetes-sigs/cloud-provider-azure")
    azure_commit = commit_of(azure, "v1.36.5")
    main = git(azure, "show", f"{azure_commit}:cmd/cloud-controller-manager/app/controllermanager.go")
    body = main[main.index("func newControllerInitializers()"):]
    body = body[:body.index("\n}\n")]
    provider = mirror(mirrors, "kubernetes/cloud-provider")
    wanted = go_mod_version(go_mod, "k8s.io/cloud-provider")
    tag = nearest_tag(provider, wanted)
    provider_commit = commit_of(provider, tag)
    names_go = git(provider, "show", f"{provider_commit}:names/controller_names.go")
    consts = dict(re.findall(r"^\s*(\w+)\s*=\s*\"([a-z-]+)\"", names_go, re.M))
    canonical = {consts.get(k.removeprefix("names."), k.strip('"'))
                 for k in re.findall(r"controllers\[((?:names\.\w+)|(?:\"[a-z-]+\"))\]", body)}
    aliases_body = names_go[names_go.index("func CCMControllerAliases()"):]
    aliases = {alias: consts[target] for alias, target in re.findall(r"\"([a-z-]+)\":\s*(\w+),", aliases_body)}
    return {"canonical": sorted(canonical), "aliases": dict(sorted(aliases.items())),
            "sources": [{"repo": "kubernetes-sigs/cloud-provider-azure", "tag": "v1.36.5", "commit": azure_commit,
                         "path": "cmd/cloud-controller-manager/app/controllermanager.go"},
                        {"repo": "kubernetes/cloud-provider", "tag": tag,
                         **({"wanted": wanted} if wanted != tag else {}), "commit": provider_commit,
                         "path": "names/controller_names.go"}]}
