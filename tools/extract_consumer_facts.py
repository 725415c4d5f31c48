"""Read what our consumers accept from their sources at the versions we pin, and save it as small catalogues under
tests/data/consumers/ (one JSON file per consumer, with repository, tag and commit of every file read).

Flags: Go flag definitions (`fs.StringVar(&x, "name", ...)`, `flag.Bool("name", ...)`, pflag's `*VarP`, and a
package constant used as the name) in the files that register the consumer's command line, listed per consumer
below with the reason each file is on the list. Chart values: every key path of the chart's values.yaml at the
pinned tag, and every `.Values.<path>` its templates read.

Repositories come from local mirrors (bare git directories, e.g. what `git clone --mirror` gives), looked up as
<mirrors>/<owner>+<name>/repo. A tag missing from a mirror stops the run with its name. Re-run after a version bump:

    python -m tools.extract_consumer_facts --mirrors /work/.mirror

Tests (tests/test_consumer_flags.py, tests/test_chart_values_keys.py) read only the saved catalogues.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "consumers"

FLAG_TYPES = ("Bool|String|Int|Int8|Int16|Int32|Int64|Uint|Uint8|Uint16|Uint32|Uint64|Float32|Float64|Duration|IP|"
              "IPMask|IPNet|IPSlice|StringSlice|StringArray|StringToString|StringToInt|StringToInt64|IntSlice|"
              "Int32Slice|Int64Slice|UintSlice|BoolSlice|Float32Slice|Float64Slice|DurationSlice|BytesHex|"
              "BytesBase64|Count|Func|BoolFunc|Text|")
DEFINE = re.compile(r"\.(?:(?:" + FLAG_TYPES + r")(?:Var)?P?|Var|VarP|TextVar)\(\s*"
                    r"(?:[^\"(),]+(?:\([^()]*\))?[^\"(),]*,\s*)?"  # the destination pointer or Value, if any
                    r"(?:\"(?P<name>[A-Za-z0-9][A-Za-z0-9_.-]*)\"|(?P<const>[A-Za-z_][A-Za-z0-9_.]*)\s*,)")
HELPER = re.compile(r"\bmultiStringFlag\(\s*\"(?P<name>[a-z0-9-]+)\"")
"""cluster-autoscaler config/flags/flags.go defines its repeated flags through this helper (flag.Var inside)."""


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


def _git(repo_dir: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo_dir), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} in {repo_dir}: {done.stderr.strip()}")
    return done.stdout


def mirror(mirrors: Path, repo: str) -> Path:
    found = mirrors / repo.replace("/", "+") / "repo"
    if not found.is_dir():
        raise SystemExit(f"no mirror of {repo} at {found}: fetch it first")
    return found


def commit_of(repo_dir: Path, tag: str) -> str:
    if not _git(repo_dir, "tag", "--list", tag).strip():
        raise SystemExit(f"tag {tag} is not in {repo_dir}")
    return _git(repo_dir, "rev-parse", f"{tag}^{{commit}}").strip()


def nearest_tag(repo_dir: Path, wanted: str) -> str:
    """`wanted` when the mirror has it, else the newest earlier patch of the same minor (recorded as such)."""
    if _git(repo_dir, "tag", "--list", wanted).strip():
        return wanted
    series, _, patch = wanted.rpartition(".")
    earlier = [t for t in _git(repo_dir, "tag", "--list", f"{series}.*").split()
               if re.fullmatch(rf"{re.escape(series)}\.\d+", t) and int(t.rpartition(".")[2]) < int(patch)]
    if not earlier:
        raise SystemExit(f"neither {wanted} nor an earlier patch of it is in {repo_dir}")
    return max(earlier, key=lambda t: int(t.rpartition(".")[2]))


def go_mod_version(text: str, module: str) -> str:
    """The module's version, a `replace` taking precedence (go.mod reference: replace directives)."""
    replaced = re.search(rf"^\s*(?:replace\s+)?{re.escape(module)}\s+=>\s+{re.escape(module)}\s+(v\S+)", text, re.M)
    if replaced:
        return replaced[1]
    required = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", text, re.M)
    if not required:
        raise SystemExit(f"{module} not in go.mod")
    return required[1]


def go_flags(text: str) -> set[str]:
    """Flag names a Go file defines; a name given as a constant is resolved in the same file."""
    consts = dict(re.findall(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*(?:string\s*)?=\s*\"([A-Za-z0-9][A-Za-z0-9_.-]*)\"", text))
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))
    names = set()
    for match in DEFINE.finditer(code):
        if match["name"]:
            names.add(match["name"])
        elif match["const"] and match["const"].rsplit(".", 1)[-1] in consts:
            names.add(consts[match["const"].rsplit(".", 1)[-1]])
    names.update(m["name"] for m in HELPER.finditer(code))
    return names


def normalized(name: str) -> str:
    """component-base cli/flag/flags.go WordSepNormalizeFunc: `_` and `-` are the same flag (InitFlags sets it)."""
    return name.replace("_", "-")


def ccm_controllers(mirrors: Path, go_mod: str) -> dict[str, Any]:
    """The names `--controllers` accepts in cloud-provider-azure's cloud-controller-manager: the keys of
    newControllerInitializers (cmd/cloud-controller-manager/app/controllermanager.go), with k8s.io/cloud-provider's
    names/controller_names.go constants resolved, and that file's CCMControllerAliases (generic.go replaces an
    alias by its canonical name before checking)."""
    azure = mirror(mirrors, "kubernetes-sigs/cloud-provider-azure")
    azure_commit = commit_of(azure, "v1.36.5")
    main = _git(azure, "show", f"{azure_commit}:cmd/cloud-controller-manager/app/controllermanager.go")
    body = main[main.index("func newControllerInitializers()"):]
    body = body[:body.index("\n}\n")]
    provider = mirror(mirrors, "kubernetes/cloud-provider")
    wanted = go_mod_version(go_mod, "k8s.io/cloud-provider")
    tag = nearest_tag(provider, wanted)
    provider_commit = commit_of(provider, tag)
    names_go = _git(provider, "show", f"{provider_commit}:names/controller_names.go")
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


def extract_flags(mirrors: Path, consumer: FlagConsumer) -> dict[str, Any]:
    first = consumer.sources[0]
    go_mod = _git(mirror(mirrors, first.repo), "show", f"{first.ref}:{consumer.go_mod}") if consumer.go_mod else ""
    read, flags = [], set()
    for source in consumer.sources:
        repo_dir = mirror(mirrors, source.repo)
        wanted = (go_mod_version(go_mod, source.ref.removeprefix("gomod:")) if source.ref.startswith("gomod:")
                  else source.ref)
        tag = nearest_tag(repo_dir, wanted)
        commit = commit_of(repo_dir, tag)
        from_source = 0
        for path in source.paths:
            found = go_flags(_git(repo_dir, "show", f"{commit}:{path}"))
            from_source += len(found)
            flags |= {normalized(f) for f in found}
            read.append({"repo": source.repo, "tag": tag, **({"wanted": wanted} if wanted != tag else {}),
                         "commit": commit, "path": path, "why": source.why, "flags": len(found)})
        if not from_source:
            raise SystemExit(f"{source.repo} {tag} {source.paths}: no flag definitions found")
    return {"consumer": consumer.name, "version": consumer.version, "sources": read, "flags": sorted(flags)}


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
            read.update(m[1].lstrip(".") for m in TEMPLATE_REF.finditer(_git(repo_dir, "show", f"{commit}:{path}")))
    return read


def job_templates(repo_dir: Path, commit: str, listing: list[str]) -> list[str]:
    """Templates that create Jobs or CronJobs (Helm hooks included): what an admission webhook on Jobs sees."""
    return sorted(p for p in listing
                  if p.endswith((".yaml", ".yml")) and JOB_KIND.search(_git(repo_dir, "show", f"{commit}:{p}")))


def managed_jobs_selector_webhooks(repo_dir: Path, commit: str, listing: list[str]) -> list[str]:
    """Kueue's chart: the webhooks whose namespaceSelector is the manager config's managedJobsNamespaceSelector
    (`{{- if (hasKey $managerConfig "managedJobsNamespaceSelector") }}` right under `namespaceSelector:`)."""
    names: list[str] = []
    for path in listing:
        if not path.endswith("webhook/manifests.yaml"):
            continue
        text = _git(repo_dir, "show", f"{commit}:{path}")
        names += re.findall(r"^\s*name: ([a-z0-9.-]+)\n\s*namespaceSelector:\n\s*\{\{- if \(hasKey \$managerConfig "
                            r"\"managedJobsNamespaceSelector\"\) \}\}", text, re.M)
    return sorted(set(names))


def extract_chart(mirrors: Path, chart: Chart) -> dict[str, Any]:
    repo_dir = mirror(mirrors, chart.repo)
    commit = commit_of(repo_dir, chart.tag)
    values = yaml.safe_load(_git(repo_dir, "show", f"{commit}:{chart.chart_dir}/values.yaml")) or {}
    keys = key_paths(values)
    subcharts = re.findall(rf"^{re.escape(chart.chart_dir)}/charts/([^/]+)/values\.yaml$",
                           _git(repo_dir, "ls-tree", "-r", "--name-only", commit, f"{chart.chart_dir}/charts/"), re.M)
    for sub in subcharts:  # a dependency's values sit under its name; the parent's own entries win
        sub_values = yaml.safe_load(_git(repo_dir, "show", f"{commit}:{chart.chart_dir}/charts/{sub}/values.yaml"))
        keys = {**key_paths(sub_values or {}, sub), **keys}
    listing = _git(repo_dir, "ls-tree", "-r", "--name-only", commit, f"{chart.chart_dir}/templates/").split()
    read = template_reads(repo_dir, commit, listing)
    jobs = job_templates(repo_dir, commit, listing)
    selector_webhooks = managed_jobs_selector_webhooks(repo_dir, commit, listing)
    subchart_sources = []
    for sub in chart.subcharts:
        sub_dir = mirror(mirrors, sub.repo)
        sub_commit = commit_of(sub_dir, sub.tag)
        sub_listing = _git(sub_dir, "ls-tree", "-r", "--name-only", sub_commit, f"{sub.chart_dir}/templates/").split()
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


@dataclass(frozen=True)
class PackagedChart:
    """A chart as its project publishes it: `<name>-<version>.tgz` in a chart repository's git tree."""

    name: str
    repo: str
    version: str


def extract_packaged_chart(mirrors: Path, chart: PackagedChart) -> dict[str, Any]:
    repo_dir = mirror(mirrors, chart.repo)
    files = _git(repo_dir, "ls-tree", "--name-only", "HEAD").split()
    versions = [f.removeprefix(f"{chart.name}-").removesuffix(".tgz") for f in files
                if re.fullmatch(rf"{re.escape(chart.name)}-\d+\.\d+\.\d+\.tgz", f)]
    series, _, patch = chart.version.rpartition(".")
    candidates = [v for v in versions if v.rpartition(".")[0] == series and int(v.rpartition(".")[2]) <= int(patch)]
    if not candidates:
        raise SystemExit(f"no {chart.name} {series}.x at or below {chart.version} in {repo_dir}")
    used = max(candidates, key=lambda v: int(v.rpartition(".")[2]))
    package = f"{chart.name}-{used}.tgz"
    commit = _git(repo_dir, "log", "-1", "--format=%H", "HEAD", "--", package).strip()
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


STRUCT = re.compile(r"^type (\w+) struct \{\n(.*?)^\}", re.M | re.S)
FIELD = re.compile(r"^\s*(?:(\w+)\s+)?([\w.*\[\]]+(?:\[[\w.*]+\][\w.*]+)?)\s+`json:\"([^\"]*)\"", re.M)


def go_structs(text: str, qualifier: str = "") -> dict[str, dict[str, str]]:
    """Each struct's JSON fields -> Go type; an embedded `json:",inline"` field as `<inline>` -> its type. Types
    are qualified with `qualifier` when they name a struct of the same file."""
    structs: dict[str, dict[str, str]] = {}
    for name, body in STRUCT.findall(text):
        fields: dict[str, str] = {}
        for _field, kind, tag in FIELD.findall(body):
            json_name = tag.split(",")[0]
            if not json_name and "inline" in tag:
                fields[f"<inline>{kind}"] = kind
            elif json_name and json_name != "-":
                fields[json_name] = kind
        structs[f"{qualifier}{name}"] = fields
    local = {n.removeprefix(qualifier) for n in structs}
    if qualifier:  # qualify references to the same file's structs
        for fields in structs.values():
            for key, kind in fields.items():
                bare = kind.lstrip("*[]")
                if bare in local:
                    fields[key] = kind[: len(kind) - len(bare)] + qualifier + bare
    return structs


def kueue_configuration_schema(mirrors: Path, tag: str) -> dict[str, Any]:
    """Kueue decodes its Configuration strictly (v0.19.2 pkg/config/config.go `serializer.EnableStrict`): an
    unknown field stops the manager. Its structs (apis/config/v1beta2/configuration_types.go), with the external
    ones it embeds or points to from apimachinery's meta/v1 and component-base's config/v1alpha1 at its go.mod's
    versions."""
    kueue = mirror(mirrors, "kubernetes-sigs/kueue")
    commit = commit_of(kueue, tag)
    go_mod = _git(kueue, "show", f"{commit}:go.mod")
    structs = go_structs(_git(kueue, "show", f"{commit}:apis/config/v1beta2/configuration_types.go"))
    sources = [{"repo": "kubernetes-sigs/kueue", "tag": tag, "commit": commit,
                "path": "apis/config/v1beta2/configuration_types.go"}]
    for repo, module, path, qualifier in (
            ("kubernetes/apimachinery", "k8s.io/apimachinery", "pkg/apis/meta/v1/types.go", "metav1."),
            ("kubernetes/component-base", "k8s.io/component-base", "config/v1alpha1/types.go", "configv1alpha1.")):
        repo_dir = mirror(mirrors, repo)
        wanted = go_mod_version(go_mod, module)
        used = nearest_tag(repo_dir, wanted)
        ext_commit = commit_of(repo_dir, used)
        structs.update(go_structs(_git(repo_dir, "show", f"{ext_commit}:{path}"), qualifier))
        sources.append({"repo": repo, "tag": used, **({"wanted": wanted} if wanted != used else {}),
                        "commit": ext_commit, "path": path})
    return {"root": "Configuration", "structs": dict(sorted(structs.items())), "sources": sources}


_CB = "kubernetes/component-base"
_KLOG = "kubernetes/klog"

FLAG_CONSUMERS = (
    FlagConsumer("cluster-autoscaler", "1.36.1", go_mod="cluster-autoscaler/go.mod", sources=(
        Source("kubernetes/autoscaler", "cluster-autoscaler-1.36.1",
               ("cluster-autoscaler/config/flags/flags.go", "cluster-autoscaler/main.go"),
               "the autoscaler's own flags (flag.* package-level) and main()"),
        Source(_CB, "gomod:k8s.io/component-base", ("config/options/leaderelectionconfig.go",),
               "main.go BindLeaderElectionFlags(&leaderElection, pflag.CommandLine)"),
        Source(_CB, "gomod:k8s.io/component-base", ("logs/api/v1/options.go",),
               "main.go logsapi.AddFlags(loggingConfig, pflag.CommandLine)"),
        Source(_CB, "gomod:k8s.io/component-base", ("featuregate/feature_gate.go",),
               "main.go featureGate.AddFlag(pflag.CommandLine)"),
        Source(_KLOG, "gomod:k8s.io/klog/v2", ("klog.go",),
               "main.go klog.InitFlags(nil) on the Go flag set, added to pflag by kube_flag.InitFlags"),
    )),
    FlagConsumer("cloud-controller-manager", "1.36.5", go_mod="go.mod", sources=(
        Source("kubernetes-sigs/cloud-provider-azure", "v1.36.5",
               ("cmd/cloud-controller-manager/app/options/options.go",
                "cmd/cloud-controller-manager/app/options/nodeipamcontroller.go",
                "cmd/cloud-controller-manager/app/options/dynamic.go"),
               "CloudControllerManagerOptions.Flags (cmd/cloud-controller-manager/app/controllermanager.go adds "
               "them; its --version comes from pkg/version/verflag through a wrapper this reader does not follow)"),
        Source("kubernetes/controller-manager", "gomod:k8s.io/controller-manager",
               ("options/generic.go", "options/debugging.go", "pkg/leadermigration/options/options.go"),
               "o.Generic.AddFlags: generic options, debugging, leader migration"),
        Source("kubernetes/cloud-provider", "gomod:k8s.io/cloud-provider",
               ("options/kubecloudshared.go", "options/cloudprovider.go", "options/servicecontroller.go"),
               "o.KubeCloudShared.AddFlags (with its CloudProvider options), o.ServiceController.AddFlags"),
        Source("kubernetes/apiserver", "gomod:k8s.io/apiserver",
               ("pkg/server/options/serving.go", "pkg/server/options/authentication.go",
                "pkg/server/options/authorization.go"),
               "SecureServing, Authentication, Authorization .AddFlags"),
        Source(_CB, "gomod:k8s.io/component-base",
               ("config/options/leaderelectionconfig.go", "featuregate/feature_gate.go",
                "cli/globalflag/globalflags.go", "logs/logs.go"),
               "Generic.AddFlags binds leader election; DefaultMutableFeatureGate.AddFlag; globalflag.AddGlobalFlags "
               "(help, and klog's flags through logs.AddFlags)"),
        Source(_KLOG, "gomod:k8s.io/klog/v2", ("klog.go",), "klog's flags (globalflag, logs.AddFlags)"),
    )),
    FlagConsumer("kube-apiserver (k8s.io/apiserver options)", "1.36", sources=(
        Source("kubernetes/apiserver", "kubernetes-1.36.4",
               ("pkg/server/options/server_run_options.go", "pkg/server/options/audit.go",
                "pkg/server/options/etcd.go", "pkg/server/options/feature.go"),
               "the generic server options kube-apiserver registers (run options, audit, etcd, profiling)"),
    )),
    FlagConsumer("kube-controller-manager (k8s.io/controller-manager, cloud-provider options)", "1.36", sources=(
        Source("kubernetes/controller-manager", "v0.36.4", ("options/generic.go",),
               "GenericControllerManagerConfigurationOptions, shared with kube-controller-manager "
               "(kube-api-qps, kube-api-burst)"),
        Source("kubernetes/cloud-provider", "v0.36.4", ("options/kubecloudshared.go",),
               "KubeCloudSharedOptions, shared with kube-controller-manager (allocate-node-cidrs)"),
    )),
    FlagConsumer("coredns", "v1.14.2", sources=(
        Source("coredns/coredns", "v1.14.2", ("coremain/run.go",), "CoreDNS's command line (init in coremain)"),
    )),
    FlagConsumer("node-cache", "1.26.4", go_mod="go.mod", sources=(
        Source("kubernetes/dns", "1.26.4", ("cmd/node-cache/main.go",), "node-cache's own flags"),
        Source("coredns/coredns", "gomod:github.com/coredns/coredns", ("coremain/run.go",),
               "the CoreDNS it embeds registers -conf and -pidfile, which main.go looks up"),
    )),
    FlagConsumer("kubelet-csr-approver", "v1.2.14", sources=(
        Source("postfinance/kubelet-csr-approver", "v1.2.14", ("internal/cmd/cmd.go",),
               "its FlagSet (controller-runtime's ctrlconfig.RegisterFlags, --kubeconfig, is not read)"),
    )),
    FlagConsumer("etcdctl", "3.6.14", sources=(
        Source("etcd-io/etcd", "v3.6.14",
               ("etcdctl/ctlv3/ctl.go", "etcdctl/ctlv3/command/member_command.go",
                "etcdctl/ctlv3/command/ep_command.go", "etcdctl/ctlv3/command/snapshot_command.go",
                "etcdctl/ctlv3/command/defrag_command.go", "etcdctl/ctlv3/command/move_leader_command.go"),
               "the global flags (ctl.go) and those of the subcommands the boot scripts run (member, endpoint, "
               "snapshot, defrag, move-leader), as one set"),
    )),
    FlagConsumer("etcd", "3.6.14", sources=(
        Source("etcd-io/etcd", "v3.6.14", ("server/embed/config.go", "server/etcdmain/config.go"),
               "embed.Config.AddFlags and etcdmain's own flags (server/etcdmain/config.go newConfig)"),
    )),
)

CHARTS = (
    Chart("kueue", "kubernetes-sigs/kueue", "v0.19.2", "charts/kueue"),
    Chart("gpu-operator", "NVIDIA/gpu-operator", "v26.3.3", "deployments/gpu-operator", subcharts=(
        Subchart("node-feature-discovery", "kubernetes-sigs/node-feature-discovery", "v0.18.3",
                 "deployment/helm/node-feature-discovery"),)),
    Chart("nvidia-dra-driver-gpu", "kubernetes-sigs/dra-driver-nvidia-gpu", "v25.12.0",
          "deployments/helm/nvidia-dra-driver-gpu"),
    Chart("dranet", "kubernetes-sigs/dranet", "v1.4.0", "deployments/helm/dranet"),
)


PACKAGED_CHARTS = (PackagedChart("cilium", "cilium/charts", "1.20.3"),)
"""cilium/cilium is larger than a mirror here may be; cilium/charts holds the packages Helm installs."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for consumer in FLAG_CONSUMERS:
        facts = extract_flags(args.mirrors, consumer)
        name = consumer.name.split(" ")[0]
        if name == "cloud-controller-manager":
            go_mod = _git(mirror(args.mirrors, "kubernetes-sigs/cloud-provider-azure"), "show", "v1.36.5:go.mod")
            facts["controllers"] = ccm_controllers(args.mirrors, go_mod)
        (args.out / f"flags-{name}.json").write_text(json.dumps(facts, indent=1) + "\n")
        print(f"{name}: {len(facts['flags'])} flags from {len(facts['sources'])} files")
    for packaged in PACKAGED_CHARTS:
        facts = extract_packaged_chart(args.mirrors, packaged)
        (args.out / f"values-{packaged.name}.json").write_text(json.dumps(facts, indent=1) + "\n")
        print(f"{packaged.name} {facts['tag']}: {len(facts['keys'])} values keys, "
              f"{len(facts['template_reads'])} template reads")
    for chart in CHARTS:
        facts = extract_chart(args.mirrors, chart)
        if chart.name == "kueue":
            facts["manager_config"] = kueue_configuration_schema(args.mirrors, chart.tag)
        (args.out / f"values-{chart.name}.json").write_text(json.dumps(facts, indent=1) + "\n")
        print(f"{chart.name}: {len(facts['keys'])} values keys, {len(facts['template_reads'])} template reads")
    return 0


if __name__ == "__main__":
    sys.exit(main())
