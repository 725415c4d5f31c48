"""Every flag we render, checked against the flags its program defines at the version we pin, as read from its
source by tools/extract_consumer_facts.py (catalogues in components/catalog/facts/consumers/ with repository, tag, commit and
path of every file read). pflag stops a program at an unknown flag (cluster-autoscaler: ExitOnError), so a flag
a docstring believes in crash-loops the program.

Read from the plan as `gpucluster plan dev` writes it: workloads' container args (manifests/), kubeadm's
extraArgs and the etcd run script (boot/).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.catalog import metrics_consumers
from tools.consumer_facts.go_source import go_flags, go_mod_version, normalized
from tools.facts_home import CONSUMERS

CATALOGUES = CONSUMERS

NOT_EXTRACTED: dict[str, set[str]] = {
    "kubelet": {"node-labels", "image-credential-provider-config", "image-credential-provider-bin-dir"},
    "kube-scheduler": {"config"},
    "kube-apiserver": {"kubelet-certificate-authority"},
}
"""Flags defined in kubernetes/kubernetes itself (cmd/kubelet/app/options, cmd/kube-scheduler/app/options,
pkg/controlplane/apiserver/options), whose repository is larger than a mirror here may be: no catalogue, so they are
listed by name and a new one fails below until it is extracted or listed here."""


def catalogue(name: str) -> set[str]:
    return set(json.loads((CATALOGUES / f"flags-{name}.json").read_text())["flags"])


def flag_names(args: list[str]) -> list[str]:
    """`--name[=v]` and Go's single-dash `-name[=v]` (its flag package takes both); `-10` is a value."""
    return [normalized(a.lstrip("-").split("=", 1)[0]) for a in args
            if a.startswith("-") and not re.fullmatch(r"-[0-9.]+", a)]


BY_IMAGE = {"cluster-autoscaler": "cluster-autoscaler", "azure-cloud-controller-manager": "cloud-controller-manager",
            "coredns": "coredns", "k8s-dns-node-cache": "node-cache", "kubelet-csr-approver": "kubelet-csr-approver"}
"""Image name -> catalogue, for every container the layer passes flags to in `args`."""
METRICS_BY_IMAGE = {"prometheus": metrics_consumers.PROMETHEUS_FLAGS,
                    "node-exporter": metrics_consumers.NODE_EXPORTER_FLAGS,
                    "kube-state-metrics": metrics_consumers.KSM_FLAGS}
"""The metrics pipeline's programs, whose flags tools/extract_metrics_consumers.py reads into
components/catalog/facts/metrics_consumers.json."""


def unknown(args: list[str], consumer: str) -> list[str]:
    known = catalogue(consumer)
    return [f for f in flag_names(args) if f not in known]


def _container_args(out: Path, manifest: str) -> list[str]:
    deployment = yaml.safe_load((out / "manifests" / manifest).read_text())
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return list(container["args"])


def _kubeadm(out: Path) -> list[dict[str, Any]]:
    cloud_init = yaml.safe_load((out / "boot" / "apiserver.yaml").read_text())
    [config] = [f["content"] for f in cloud_init["write_files"] if f["path"] == "/etc/kubernetes/kubeadm.yaml"]
    return list(yaml.safe_load_all(config))


def _extra(args: list[dict[str, str]]) -> list[str]:
    return [f"--{a['name']}={a['value']}" for a in args]


def test_every_container_flag_exists_in_its_program(dev_out: Path) -> None:
    """Every Deployment's, StatefulSet's and DaemonSet's container `args` the plan renders, by image."""
    checked = set()
    for path in sorted((dev_out / "manifests").glob("*-*.yaml")):
        workload = yaml.safe_load(path.read_text())
        if workload["kind"] not in ("Deployment", "DaemonSet", "StatefulSet"):
            continue
        for container in workload["spec"]["template"]["spec"]["containers"]:
            if not container.get("args"):
                continue
            image = container["image"].rsplit("/", 1)[-1].split(":")[0]
            assert image in BY_IMAGE or image in METRICS_BY_IMAGE, f"{path.name}: {image} takes flags no catalogue covers"
            if image in BY_IMAGE:
                assert unknown(container["args"], BY_IMAGE[image]) == [], path.name
            else:  # kingpin (Prometheus' projects) does not fold `_` into `-`
                names = [a.lstrip("-").split("=", 1)[0] for a in container["args"] if a.startswith("-")]
                assert set(names) <= set(METRICS_BY_IMAGE[image]), path.name
            checked.add(image)
    assert checked == set(BY_IMAGE) | set(METRICS_BY_IMAGE)


def test_cluster_autoscaler_flags_exist_in_1_36_1(dev_out: Path) -> None:
    args = _container_args(dev_out, "23-deployment-kube-system-cluster-autoscaler.yaml")
    assert unknown(args, "cluster-autoscaler") == []
    assert "leader-elect-resource-name" in flag_names(args)  # its Lease, named for the Role's resourceNames


def test_a_reintroduced_unknown_autoscaler_flag_fails(dev_out: Path) -> None:
    """Issue 35 defect 1: cluster-autoscaler 1.36.1 defines no --lease-resource-name."""
    args = _container_args(dev_out, "23-deployment-kube-system-cluster-autoscaler.yaml")
    assert unknown([*args, "--lease-resource-name=cluster-autoscaler"], "cluster-autoscaler") == [
        "lease-resource-name"]


def test_cloud_node_lifecycle_flags_exist_in_cloud_provider_azure_1_36_5(dev_out: Path) -> None:
    args = _container_args(dev_out, "23-deployment-kube-system-cloud-node-lifecycle.yaml")
    assert unknown(args, "cloud-controller-manager") == []


def test_the_lifecycle_controller_is_one_the_ccm_starts(dev_out: Path) -> None:
    """`--controllers` names must be keys of newControllerInitializers or their aliases (cloud-provider-azure v1.36.5,
    k8s.io/cloud-provider names/controller_names.go CCMControllerAliases); `*` and `-name` as generic.go reads them."""
    known = json.loads((CATALOGUES / "flags-cloud-controller-manager.json").read_text())["controllers"]
    names = set(known["canonical"]) | set(known["aliases"])
    args = _container_args(dev_out, "23-deployment-kube-system-cloud-node-lifecycle.yaml")
    [value] = [a.split("=", 1)[1] for a in args if a.startswith("--controllers=")]
    asked = [c.removeprefix("-") for c in value.split(",") if c != "*"]
    assert asked == ["cloud-node-lifecycle"] and set(asked) <= names
    assert "node-lifecycle" not in names  # a near miss would be refused


def test_etcd_flags_exist_in_3_6_14(dev_out: Path) -> None:
    cloud_init = yaml.safe_load((dev_out / "boot" / "etcd-0.yaml").read_text())
    [script] = [f["content"] for f in cloud_init["write_files"] if "exec /usr/local/bin/etcd " in f.get("content", "")]
    command = script[script.index("exec /usr/local/bin/etcd "):]
    args = re.findall(r"(--[a-z0-9-]+)(?:=\S*)?", command)
    assert len(args) > 15 and "--initial-cluster-state" in args
    assert unknown(args, "etcd") == []


def test_etcdctl_flags_exist_in_3_6_14(dev_out: Path) -> None:
    cloud_init = yaml.safe_load((dev_out / "boot" / "etcd-0.yaml").read_text())
    lines = [line for f in cloud_init["write_files"] for line in (f.get("content") or "").splitlines()
             if re.search(r"\betcdctl(_at)?\b", line)]
    args = [a for line in lines for a in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", line)]
    assert {"--endpoints", "--cacert", "--command-timeout", "--peer-urls", "--write-out"} <= set(args)
    assert unknown(args, "etcdctl") == []


def test_kubeadm_extra_args_exist_where_they_can_be_read(dev_out: Path) -> None:
    docs = {d["kind"]: d for d in _kubeadm(dev_out)}
    cluster = docs["ClusterConfiguration"]
    apiserver = unknown(_extra(cluster["apiServer"]["extraArgs"]), "kube-apiserver")
    controller_manager = unknown(_extra(cluster["controllerManager"]["extraArgs"]), "kube-controller-manager")
    assert controller_manager == []
    assert set(apiserver) == NOT_EXTRACTED["kube-apiserver"]
    assert set(flag_names(_extra(cluster["scheduler"]["extraArgs"]))) == NOT_EXTRACTED["kube-scheduler"]
    kubelet = set(flag_names(_extra(docs["InitConfiguration"]["nodeRegistration"].get("kubeletExtraArgs", []))))
    for node in (dev_out / "boot").glob("pool-*.yaml"):
        text = yaml.safe_load(node.read_text())
        for file in text["write_files"]:
            if "JoinConfiguration" in file.get("content", ""):
                join = next(d for d in yaml.safe_load_all(file["content"]) if d["kind"] == "JoinConfiguration")
                kubelet |= set(flag_names(_extra(join["nodeRegistration"]["kubeletExtraArgs"])))
    assert kubelet == NOT_EXTRACTED["kubelet"]


def test_the_catalogues_name_their_sources() -> None:
    for path in CATALOGUES.glob("flags-*.json"):
        facts = json.loads(path.read_text())
        assert facts["flags"] and facts["sources"]
        assert all(re.fullmatch(r"[0-9a-f]{40}", s["commit"]) and s["tag"] and s["path"] for s in facts["sources"])


GO = '''
const flagName = "feature-gates"
var (
	a = flag.String("cluster-name", "", "x")
	b = flag.Float64(
		"scale-down-utilization-threshold", 0.5, "x")
	// c = flag.Bool("commented-out", false, "x")
)
func bind(l *Config, fs *pflag.FlagSet) {
	fs.StringVar(&l.ResourceName, "leader-elect-resource-name", l.ResourceName, "x")
	fs.VarP(VerbosityLevelPflag(&c.Verbosity), "v", "v", "x")
	fs.Var(f, flagName, "x")
	nodeGroups = multiStringFlag("nodes", "x")
	pflag.CommandLine.Changed("not-a-definition")
}
'''


def test_the_reader_finds_go_flag_definitions() -> None:
    assert go_flags(GO) == {"cluster-name", "scale-down-utilization-threshold", "leader-elect-resource-name", "v",
                            "feature-gates", "nodes"}


@pytest.mark.parametrize(("text", "version"), [
    ("require (\n\tk8s.io/component-base v0.36.2\n)\n", "v0.36.2"),
    ("require k8s.io/component-base v0.36.1\nreplace k8s.io/component-base => k8s.io/component-base v0.36.2\n",
     "v0.36.2"),
])
def test_go_mod_versions(text: str, version: str) -> None:
    assert go_mod_version(text, "k8s.io/component-base") == version
