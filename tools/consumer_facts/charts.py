"""A chart's values keys, the `.Values` paths its templates read, and what its templates create."""

from __future__ import annotations

import io
import re
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tools.consumer_facts.mirrors import commit_of, git, mirror


@dataclass(frozen=True)
class Subchart:
    """A dependency whose templates the parent's repository does not hold (only its values.yaml)."""

    name: str
    repo: str
    tag: str
    chart_dir: str


@dataclass(frozen=True)
class Chart:
    name: str
    repo: str
    tag: str
    chart_dir: str
    subcharts: tuple[Subchart, ...] = ()


@dataclass(frozen=True)
class PackagedChart:
    """A chart as its project publishes it: `<name>-<version>.tgz` in a chart repository's git tree."""

    name: str
    repo: str
    version: str


def key_paths(values: Any, prefix: str = "") -> dict[str, str]:
    """Every key path of a values tree -> `map` (a non-empty mapping), `free` (an empty mapping or null: any keys),
    `list`, or `scalar`."""
    out: dict[str, str] = {}
    if isinstance(values, dict):
        for key, value in values.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, dict) and value and not all("/" in str(k) or "." in str(k) for k in value):
                out[path] = "map"
                out.update(key_paths(value, path))
            elif isinstance(value, dict) or value is None:  # empty, null, or keyed by labels: any keys
                out[path] = "free"
            else:
                out[path] = "list" if isinstance(value, list) else "scalar"
    return out


JOB_KIND = re.compile(r"^kind:\s*(Job|CronJob)\s*$", re.M)
TEMPLATE_REF = re.compile(r"\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")


def template_reads(repo_dir: Path, commit: str, listing: list[str]) -> set[str]:
    read: set[str] = set()
    for path in listing:
        if path.endswith((".yaml", ".yml", ".tpl", ".txt", ".json")):
            read.update(m[1].lstrip(".") for m in TEMPLATE_REF.finditer(git(repo_dir, "show", f"{commit}:{path}")))
    return read


def job_templates(repo_dir: Path, commit: str, listing: list[str]) -> list[str]:
    """Templates that create Jobs or CronJobs (Helm hooks included): what an admission webhook on Jobs sees."""
    return sorted(p for p in listing
                  if p.endswith((".yaml", ".yml")) and JOB_KIND.search(git(repo_dir, "show", f"{commit}:{p}")))


def managed_jobs_selector_webhooks(repo_dir: Path, commit: str, listing: list[str]) -> list[str]:
    """Kueue's chart: the webhooks whose namespaceSelector is the manager config's managedJobsNamespaceSelector
    (`{{- if (hasKey $managerConfig "managedJobsNamespaceSelector") }}` right under `namespaceSelector:`), with the
    webhook's failurePolicy and the template lines choosing it in between (mpod.kb.io, mdeployment.kb.io)."""
    names: list[str] = []
    for path in listing:
        if not path.endswith("webhook/manifests.yaml"):
            continue
        text = git(repo_dir, "show", f"{commit}:{path}")
        names += re.findall(r"^\s*name: ([a-z0-9.-]+)\n(?:\s*(?:\{\{-? [^\n]*\}\}|failurePolicy: \w+)\n)*"
                            r"\s*namespaceSelector:\n\s*\{\{- if \(hasKey \$managerConfig "
                            r"\"managedJobsNamespaceSelector\"\) \}\}", text, re.M)
    return sorted(set(names))


def extract_chart(mirrors: Path, chart: Chart) -> dict[str, Any]:
    repo_dir = mirror(mirrors, chart.repo)
    commit = commit_of(repo_dir, chart.tag)
    values = yaml.safe_load(git(repo_dir, "show", f"{commit}:{chart.chart_dir}/values.yaml")) or {}
    keys = key_paths(values)
    subcharts = re.findall(rf"^{re.escape(chart.chart_dir)}/charts/([^/]+)/values\.yaml$",
                           git(repo_dir, "ls-tree", "-r", "--name-only", commit, f"{chart.chart_dir}/charts/"), re.M)
    for sub in subcharts:  # a dependency's values sit under its name; the parent's own entries win
        sub_values = yaml.safe_load(git(repo_dir, "show", f"{commit}:{chart.chart_dir}/charts/{sub}/values.yaml"))
        keys = {**key_paths(sub_values or {}, sub), **keys}
    listing = git(repo_dir, "ls-tree", "-r", "--name-only", commit, f"{chart.chart_dir}/templates/").split()
    read = template_reads(repo_dir, commit, listing)
    jobs = job_templates(repo_dir, commit, listing)
    selector_webhooks = managed_jobs_selector_webhooks(repo_dir, commit, listing)
    subchart_sources = []
    for sub in chart.subcharts:
        sub_dir = mirror(mirrors, sub.repo)
        sub_commit = commit_of(sub_dir, sub.tag)
        sub_listing = git(sub_dir, "ls-tree", "-r", "--name-only", sub_commit, f"{sub.chart_dir}/templates/").split()
        read |= {f"{sub.name}.{r}" for r in template_reads(sub_dir, sub_commit, sub_listing)}
        jobs += [f"{sub.repo}:{p}" for p in job_templates(sub_dir, sub_commit, sub_listing)]
        subchart_sources.append({"repo": sub.repo, "tag": sub.tag, "commit": sub_commit,
                                 "templates": f"{sub.chart_dir}/templates/"})
    return {"chart": chart.name, "repo": chart.repo, "tag": chart.tag, "commit": commit,
            "values_file": f"{chart.chart_dir}/values.yaml", "templates": f"{chart.chart_dir}/templates/",
            "subcharts": [f"{chart.chart_dir}/charts/{sub}/values.yaml" for sub in subcharts],
            "subchart_templates": subchart_sources,
            "keys": dict(sorted(keys.items())), "template_reads": sorted(read), "job_templates": jobs,
            **({"webhooks_following_managed_jobs_namespace_selector": selector_webhooks} if selector_webhooks else {})}


def extract_packaged_chart(mirrors: Path, chart: PackagedChart) -> dict[str, Any]:
    repo_dir = mirror(mirrors, chart.repo)
    files = git(repo_dir, "ls-tree", "--name-only", "HEAD").split()
    versions = [f.removeprefix(f"{chart.name}-").removesuffix(".tgz") for f in files
                if re.fullmatch(rf"{re.escape(chart.name)}-\d+\.\d+\.\d+\.tgz", f)]
    series, _, patch = chart.version.rpartition(".")
    candidates = [v for v in versions if v.rpartition(".")[0] == series and int(v.rpartition(".")[2]) <= int(patch)]
    if not candidates:
        raise SystemExit(f"no {chart.name} {series}.x at or below {chart.version} in {repo_dir}")
    used = max(candidates, key=lambda v: int(v.rpartition(".")[2]))
    package = f"{chart.name}-{used}.tgz"
    commit = git(repo_dir, "log", "-1", "--format=%H", "HEAD", "--", package).strip()
    blob = subprocess.run(["git", "-C", str(repo_dir), "show", f"{commit}:{package}"], capture_output=True,
                          check=True).stdout
    values: Any = {}
    read: set[str] = set()
    jobs: list[str] = []
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")
            if not member.isfile() or len(parts) < 2 or parts[0] != chart.name:
                continue
            text = (tar.extractfile(member) or io.BytesIO()).read().decode()
            if parts[1:] == ["values.yaml"]:
                values = yaml.safe_load(text) or {}
            elif parts[1] == "templates":
                read.update(m[1].lstrip(".") for m in TEMPLATE_REF.finditer(text))
                if member.name.endswith((".yaml", ".yml")) and JOB_KIND.search(text):
                    jobs.append(member.name)
    return {"chart": chart.name, "repo": chart.repo, "tag": used,
            **({"wanted": chart.version} if used != chart.version else {}), "commit": commit,
            "values_file": f"{package}:{chart.name}/values.yaml", "templates": f"{package}:{chart.name}/templates/",
            "keys": dict(sorted(key_paths(values).items())), "template_reads": sorted(read),
            "job_templates": sorted(jobs)}
