"""Extract what the metrics pipeline's consumers accept, from their sources at the pinned tags, into
components/catalog/facts/metrics_consumers.json (generated: re-run after a version bump and review the diff), which
components/catalog/metrics_consumers.py reads.

    python -m tools.extract_metrics_consumers --prometheus DIR --prometheus-common DIR --node-exporter DIR \
        --exporter-toolkit DIR --kube-state-metrics DIR

Each DIR is a git directory of the upstream repository. Read:
- prometheus/prometheus at PROMETHEUS_TAG: every `yaml:"..."` key of config/config.go, discovery/registry.go (the
  static and `<name>_sd_configs` keys), discovery/kubernetes/kubernetes.go, discovery/targetgroup/targetgroup.go
  (a static target group), model/relabel/relabel.go and
  storage/remote/azuread/azuread.go (it loads its config with yaml.UnmarshalStrict: an unknown key is an error); the
  relabel actions and Kubernetes discovery roles; cmd/prometheus/main.go's flags;
- prometheus/common at the version Prometheus' go.mod requires: config/http_config.go's keys (authorization,
  tls_config, ...);
- prometheus/node_exporter at NODE_EXPORTER_TAG: its flags (node_exporter.go, collector/paths.go), the collectors it
  registers (`collector.<name>` flags, collector/collector.go registerCollector) and, through exporter-toolkit at the
  version its go.mod requires, `web.listen-address`;
- kubernetes/kube-state-metrics at KSM_TAG: pkg/options/options.go's flags.
"""

from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path

from tools.extract_metrics_facts import NODE_EXPORTER_TAG, commit, show, write
from tools.facts_home import FACTS, generator_of

PROMETHEUS_TAG = "v3.14.0"
KSM_TAG = "v2.20.0"
OUT = FACTS / "metrics_consumers.json"
SOURCES = ("prometheus/prometheus, prometheus/common, prometheus/node_exporter, prometheus/exporter-toolkit and "
           "kubernetes/kube-state-metrics, at the tags and commits recorded here")
PROMETHEUS_CONFIG_FILES = ("config/config.go", "discovery/kubernetes/kubernetes.go", "model/relabel/relabel.go",
                           "storage/remote/azuread/azuread.go", "discovery/targetgroup/targetgroup.go")


def yaml_keys(go: str) -> set[str]:
    """Struct tags `yaml:"name,..."` (inline and `-` fields carry no key)."""
    return {key for key in re.findall(r'yaml:"([^",]*)', go) if key and key != "-"}


def go_mod_version(go_mod: str, module: str) -> str:
    match = re.search(rf"^\s*{re.escape(module)} (v[0-9][^\s]*)", go_mod, re.MULTILINE)
    if match is None:
        raise SystemExit(f"go.mod requires no {module}")
    return match.group(1)


def sd_keys(registry: str, sd_names: list[str]) -> set[str]:
    """`static_configs` (registry.go staticConfigsKey) and `<Name()>_sd_configs` of each discovery read."""
    static = re.search(r'staticConfigsKey\s*=\s*"([^"]+)"', registry)
    if static is None or '_sd_configs"' not in registry:
        raise SystemExit("discovery/registry.go: no staticConfigsKey or _sd_configs suffix")
    return {static.group(1), *(f"{name}_sd_configs" for name in sd_names)}


def sd_name(discovery: str) -> str:
    match = re.search(r'func \(\*SDConfig\) Name\(\) string \{ return "([^"]+)" \}', discovery)
    if match is None:
        raise SystemExit("no SDConfig.Name()")
    return match.group(1)


def constants(go: str, type_name: str) -> list[str]:
    return sorted(set(re.findall(rf'\w+\s+{type_name}\s*=\s*"([^"]+)"', go)))


def kingpin_flags(go: str) -> set[str]:
    """`Flag("name"` calls (kingpin, possibly on the next line) and Prometheus' server/agent-only wrappers."""
    return set(re.findall(r'(?:\bFlag\(|OnlyFlag\(a,)\s*"([^"]+)"', go))


def registered_collectors(go_files: list[str]) -> set[str]:
    return {name for text in go_files for name in re.findall(r'registerCollector\("([^"]+)"', text)}


def cobra_flags(go: str) -> set[str]:
    return set(re.findall(r'Flags\(\)\.\w+\([^,]+,\s*"([^"]+)"', go))


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    for name in ("prometheus", "prometheus-common", "node-exporter", "exporter-toolkit", "kube-state-metrics"):
        parser.add_argument(f"--{name}", type=Path, required=True)
    args = parser.parse_args()
    prom = args.prometheus
    common_tag = go_mod_version(show(prom, PROMETHEUS_TAG, "go.mod"), "github.com/prometheus/common")
    k8s_sd = show(prom, PROMETHEUS_TAG, "discovery/kubernetes/kubernetes.go")
    keys = set().union(*(yaml_keys(show(prom, PROMETHEUS_TAG, f)) for f in PROMETHEUS_CONFIG_FILES))
    keys |= sd_keys(show(prom, PROMETHEUS_TAG, "discovery/registry.go"), [sd_name(k8s_sd)])
    keys |= yaml_keys(show(args.prometheus_common, common_tag, "config/http_config.go"))
    ne = args.node_exporter
    toolkit_tag = go_mod_version(show(ne, NODE_EXPORTER_TAG, "go.mod"), "github.com/prometheus/exporter-toolkit")
    collector_files = [show(ne, NODE_EXPORTER_TAG, path) for path in
                       git(ne, "ls-tree", "--name-only", NODE_EXPORTER_TAG, "collector/").split()
                       if path.endswith(".go") and not path.endswith("_test.go")]
    collectors = registered_collectors(collector_files)
    ne_flags = (kingpin_flags(show(ne, NODE_EXPORTER_TAG, "node_exporter.go"))
                | kingpin_flags(show(ne, NODE_EXPORTER_TAG, "collector/paths.go"))
                | kingpin_flags(show(args.exporter_toolkit, toolkit_tag, "web/kingpinflag/flag.go"))
                | {f"collector.{name}" for name in collectors})
    facts: dict[str, object] = {
        "PROMETHEUS_TAG": PROMETHEUS_TAG,
        "PROMETHEUS_COMMIT": commit(prom, PROMETHEUS_TAG),
        "PROMETHEUS_COMMON_TAG": common_tag,
        "PROMETHEUS_COMMON_COMMIT": commit(args.prometheus_common, common_tag),
        "PROMETHEUS_CONFIG_KEYS": sorted(keys),
        "PROMETHEUS_RELABEL_ACTIONS": constants(show(prom, PROMETHEUS_TAG, "model/relabel/relabel.go"), "Action"),
        "PROMETHEUS_KUBERNETES_ROLES": constants(k8s_sd, "Role"),
        "PROMETHEUS_FLAGS": sorted(kingpin_flags(show(prom, PROMETHEUS_TAG, "cmd/prometheus/main.go"))),
        "NODE_EXPORTER_COMMIT": commit(ne, NODE_EXPORTER_TAG),
        "EXPORTER_TOOLKIT_TAG": toolkit_tag,
        "NODE_EXPORTER_FLAGS": sorted(ne_flags),
        "NODE_EXPORTER_KNOWN_COLLECTORS": sorted(collectors),
        "KSM_TAG": KSM_TAG,
        "KSM_COMMIT": commit(args.kube_state_metrics, KSM_TAG),
        "KSM_FLAGS": sorted(cobra_flags(show(args.kube_state_metrics, KSM_TAG, "pkg/options/options.go"))),
    }
    write(OUT, generator_of(__file__), SOURCES, facts)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
