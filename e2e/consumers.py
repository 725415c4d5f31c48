"""The programs make e2e runs for real: each built from the Go module proxy by a small module of ours
(e2e/consumers/<name>/go.mod, exact `require`s, committed go.sum), at the version the project pins, stamped as the
upstream release build stamps it.

A version here is read from the pin it stands for (the imports below), or says why it differs (PULUMI); the commits are
the tags' commits as the module proxy's `.info` Origin or the upstream repository names them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from gpucluster.catalog.deploy_runner import PULUMI_CLI_VERSION
from gpucluster.catalog.metrics import PROMETHEUS_VERSION
from gpucluster.catalog.metrics_consumers import PROMETHEUS_COMMIT
from gpucluster.catalog.metrics_facts import DCGM_EXPORTER_COMMIT, DCGM_EXPORTER_TAG
from gpucluster.catalog.node_images import CONTAINERD as UBUNTU_CONTAINERD
from gpucluster.catalog.versions import DEFAULT_MINOR, KUEUE, MINOR_COUPLED

ROOT = Path(__file__).resolve().parent
MODULES = ROOT / "consumers"
BUILD_DATE = "2026-08-20T11:51:43Z"
"""Stamped where a release build stamps its build date: the pinned Kubernetes tag's time in the module proxy, so a
rebuild is byte-identical."""



def _stacks_kubernetes() -> str:
    """The Kubernetes version the shipped stacks run (they agree; a stack on another version fails here)."""
    versions = {yaml.safe_load(path.read_text())["config"]["gpucluster:cluster"]["kubernetesVersion"]
                for path in sorted((ROOT.parent / "stacks").glob("Pulumi.*.yaml"))
                if "gpucluster:cluster" in yaml.safe_load(path.read_text()).get("config", {})}
    if len(versions) != 1:
        raise ValueError(f"the shipped stacks run {sorted(versions)}: make e2e builds one Kubernetes version")
    return versions.pop()


KUBERNETES = _stacks_kubernetes()
ETCD = MINOR_COUPLED[DEFAULT_MINOR].etcd.version
COREDNS = MINOR_COUPLED[DEFAULT_MINOR].coredns.version
KWOK = "v0.8.0"
HELM = "v4.3.2"
# Not the pin (components/catalog/deploy_runner.py PULUMI_CLI_VERSION, 3.272.0): the module proxy refuses
# github.com/pulumi/pulumi/pkg/v3 at v3.272.0 (and at v3.271.0, v3.273.0 and pseudo-versions) with 403 'This module
# version is not available'; v3.274.0 is the nearest release it serves.
PULUMI = "v3.274.0"


def _ubuntu_containerd() -> str:
    """The upstream release Ubuntu's containerd packages are built from (they agree; `2.2.1-0ubuntu1~24.04.3` is
    2.2.1)."""
    upstream = {version.split("-", 1)[0] for version in UBUNTU_CONTAINERD.values()}
    if len(upstream) != 1:
        raise ValueError(f"the node images install containerd {sorted(upstream)}: make e2e builds one containerd")
    return f"v{upstream.pop()}"


CONTAINERD = _ubuntu_containerd()
CONTAINERD_COMMITS = {"v2.2.1": "dea7da592f5d1d2b7755e3a161be07f43fad8f75"}
"""The tags' commits in containerd/containerd (v2.2.1: the annotated tag b4360bae points at it); the module proxy's
`.info` for v2.2.1 carries no Origin. A pin moved to a release not here stops make e2e until its commit is added."""
if CONTAINERD not in CONTAINERD_COMMITS:
    raise ValueError(f"the node images install containerd {CONTAINERD}: add its tag's commit to e2e/consumers.py "
                     "CONTAINERD_COMMITS")
CONTAINERD_COMMIT = CONTAINERD_COMMITS[CONTAINERD]


def _kube_ldflags(version: str) -> tuple[str, ...]:
    """hack/lib/version.sh kube::version::ldflags: the same values into component-base and client-go."""
    major, minor = version.split(".")[:2]
    values = {"gitVersion": f"v{version}", "gitMajor": major, "gitMinor": minor, "gitTreeState": "clean",
              "buildDate": BUILD_DATE}
    return tuple(f"-X {package}.{key}={value}" for package in ("k8s.io/component-base/version",
                                                                 "k8s.io/client-go/pkg/version")
                 for key, value in values.items())


@dataclass(frozen=True)
class Consumer:
    name: str
    version: str
    """As the program prints it (`--version`)."""
    pin: str
    """Where the project pins it."""
    commit: str
    """The tag's commit, or '' where neither the module proxy nor a readable repository names it."""
    binaries: tuple[tuple[str, str], ...]
    """(output name, Go package)."""
    version_args: tuple[str, ...]
    ldflags: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    assets: tuple[tuple[str, str, str], ...] = ()
    """(module, folder in it, name): a folder of the module at its pinned version copied beside the binaries, to
    assets/<name>."""
    env: dict[str, str] = field(default_factory=lambda: {"CGO_ENABLED": "0"})

    @property
    def module(self) -> Path:
        return MODULES / self.name


CONSUMERS: tuple[Consumer, ...] = (
    Consumer(
        "kubernetes", KUBERNETES, "stacks/Pulumi.*.yaml cluster.kubernetesVersion", "",
        tuple((c, f"k8s.io/kubernetes/cmd/{c}") for c in ("kube-apiserver", "kube-controller-manager",
                                                         "kube-scheduler", "kubeadm", "kubectl")),
        ("kube-apiserver", "--version"), _kube_ldflags(KUBERNETES)),
    Consumer(
        "etcd", ETCD, "components/catalog/versions.py MINOR_COUPLED etcd", "fc04cf702b0a46c2fd85547a2be05705b100a496",
        (("etcd", "go.etcd.io/etcd/server/v3"), ("etcdctl", "go.etcd.io/etcd/etcdctl/v3"),
         ("etcdutl", "go.etcd.io/etcd/etcdutl/v3")), ("etcd", "--version"),
        # etcd's build script (scripts/build_lib.sh): the version is a constant, the commit is stamped.
        ("-X go.etcd.io/etcd/api/v3/version.GitSHA=fc04cf70",)),
    Consumer(
        "kueue", f"v{KUEUE.version}", "components/catalog/versions.py KUEUE", "8eab68778fc1b52affe165fdf5af29d1e9b4f3cb",
        (("kueue", "sigs.k8s.io/kueue/cmd/kueue"),), (),
        # Kueue's Makefile LD_FLAGS (version_pkg sigs.k8s.io/kueue/pkg/version).
        (f"-X sigs.k8s.io/kueue/pkg/version.GitVersion=v{KUEUE.version}",
         "-X sigs.k8s.io/kueue/pkg/version.GitCommit=8eab68778fc1b52affe165fdf5af29d1e9b4f3cb",
         f"-X sigs.k8s.io/kueue/pkg/version.BuildDate={BUILD_DATE}"),
        # The chart the stacks install (out/<stack>/charts/), as the module holds it at the tag.
        assets=(("sigs.k8s.io/kueue", "charts/kueue", "chart"),)),
    Consumer(
        "kwok", KWOK, "e2e/consumers.py KWOK (a test tool: the newest release)", "156033d7df7ea0e09cea82b715fe566ea68aeeb4",
        (("kwok", "sigs.k8s.io/kwok/cmd/kwok"),), ("kwok", "--version"),
        # kwok hack/releases.sh LDFLAGS.
        (f"-X sigs.k8s.io/kwok/pkg/consts.Version={KWOK}", f"-X sigs.k8s.io/kwok/pkg/consts.KubeVersion=v{KUBERNETES}"),
        # kwok's own stages as kwokctl configures them by default: Nodes Ready at once and kept so beside the node
        # leases kwok renews; pods created, Ready, and a Job's pods complete (after the delay a pod's
        # pod-complete.stage.kwok.x-k8s.io/delay annotation names).
        assets=(("sigs.k8s.io/kwok", "kustomize/stage/node/fast", "node-stages"),
                ("sigs.k8s.io/kwok", "kustomize/stage/node/heartbeat-with-lease", "node-heartbeat"),
                ("sigs.k8s.io/kwok", "kustomize/stage/pod/general", "pod-stages"))),
    Consumer(
        "prometheus", PROMETHEUS_VERSION, "components/catalog/metrics.py PROMETHEUS_VERSION", PROMETHEUS_COMMIT,
        (("promtool", "github.com/prometheus/prometheus/cmd/promtool"),), ("promtool", "--version"),
        # Prometheus' .promu.yml ldflags (prometheus/common/version).
        (f"-X github.com/prometheus/common/version.Version={PROMETHEUS_VERSION.removeprefix('v')}",
         f"-X github.com/prometheus/common/version.Revision={PROMETHEUS_COMMIT}",
         "-X github.com/prometheus/common/version.Branch=HEAD",
         "-X github.com/prometheus/common/version.BuildUser=gpucluster@e2e",
         f"-X github.com/prometheus/common/version.BuildDate={BUILD_DATE}"),
        ("netgo", "builtinassets")),
    Consumer(
        "helm", HELM, "e2e/consumers.py HELM (renders the charts; the newest v4 release)", "",
        (("helm", "helm.sh/helm/v4/cmd/helm"),), ("helm", "version", "--short"),
        # helm's Makefile LDFLAGS.
        (f"-X helm.sh/helm/v4/internal/version.version={HELM}",
         "-X helm.sh/helm/v4/internal/version.gitTreeState=clean")),
    Consumer(
        "pulumi", PULUMI, f"components/catalog/deploy_runner.py PULUMI_CLI_VERSION (v{PULUMI_CLI_VERSION}; the nearest "
        "release the module proxy serves)", "",
        (("pulumi", "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"),), ("pulumi", "version"),
        # pulumi's .goreleaser.yml builds (CGO_ENABLED=0 by scripts/go-wrapper.sh): the version, and its tags.
        (f"-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version={PULUMI}",),
        ("osusergo", "grpcnotrace")),
    Consumer(
        "coredns", COREDNS, "components/catalog/versions.py MINOR_COUPLED coredns", "dd1df4f5db93767a44e37638df44969503b320d2",
        (("coredns", "github.com/coredns/coredns"),), ("coredns", "-version"),
        # CoreDNS's Makefile: the version is a constant (coremain), the commit is stamped.
        ("-X github.com/coredns/coredns/coremain.GitCommit=dd1df4f",)),
    Consumer(
        "dcgm-counters", DCGM_EXPORTER_TAG, "components/catalog/facts/metrics_facts.json DCGM_EXPORTER_TAG (the exporter's "
        "counters-file rules, a program of ours)", DCGM_EXPORTER_COMMIT,
        (("dcgm-counters", "gpucluster.e2e/dcgm-counters"),), ()),
    Consumer(
        "containerd", CONTAINERD, "components/catalog/node_images.py CONTAINERD (Ubuntu's 2.2.1 packages; upstream "
        "v2.2.1 as the module proxy serves it)", CONTAINERD_COMMIT,
        (("containerd", "github.com/containerd/containerd/v2/cmd/containerd"),), ("containerd", "--version"),
        # containerd v2.2.1's Makefile GO_LDFLAGS (PKG and PACKAGE github.com/containerd/containerd/v2; VERSION is the
        # tag, as the release workflow's RELEASE_VER sets it; EXTRA_LDFLAGS -s -w without GODEBUG) and GO_BUILDTAGS
        # (urfave_cli_no_docs). The release builds with cgo for the btrfs snapshotter; CGO_ENABLED=0 here leaves it out,
        # as no_btrfs (BUILDING.md) says.
        (f"-X github.com/containerd/containerd/v2/version.Version={CONTAINERD}",
         f"-X github.com/containerd/containerd/v2/version.Revision={CONTAINERD_COMMIT}",
         "-X github.com/containerd/containerd/v2/version.Package=github.com/containerd/containerd/v2",
         "-s", "-w"),
        ("urfave_cli_no_docs", "no_btrfs")),
)

NOT_BUILT: dict[str, str] = {
    "cluster-autoscaler": (
        "tag cluster-autoscaler-1.36.1 is commit 35e8a280425c76a4040f57ae0fa232a952c02024 (kubernetes/autoscaler); "
        "the module proxy refuses k8s.io/autoscaler/cluster-autoscaler at its pseudo-version "
        "v0.0.0-20260722070747-35e8a280425c (403 'This module version is not available'), so its flags stay the "
        "catalogue read from its source (components/catalog/facts/consumers/)"),
    "dcgm-exporter": (
        "links NVIDIA's DCGM library (cgo) and reads GPUs; its counters-file parser is an internal package, so "
        "e2e/consumers/dcgm-counters applies the same reader settings and checks"),
    "pulumi-language-python": (
        "the Python language host is a module of its own (github.com/pulumi/pulumi/sdk/python/cmd/"
        "pulumi-language-python/v3) that pulumi/pulumi never tags; the module proxy refuses its version list, "
        "v3.272.0, v3.274.0 and pseudo-versions (403), so `pulumi preview` of the program cannot run here and its "
        "refusals run under tests/test_program_check.py's child instead"),
}


def by_name(name: str) -> Consumer:
    return next(c for c in CONSUMERS if c.name == name)


def cache_root() -> Path:
    return ROOT.parent / ".cache" / "consumers"


def install_dir(consumer: Consumer) -> Path:
    return cache_root() / f"{consumer.name}-{consumer.version}"


def binary(name: str, program: str | None = None) -> Path:
    consumer = by_name(name)
    path = install_dir(consumer) / "bin" / (program or consumer.binaries[0][0])
    if not path.exists():
        raise FileNotFoundError(f"{path} is not built: run `python -m e2e.build {name}` (make e2e does)")
    return path
