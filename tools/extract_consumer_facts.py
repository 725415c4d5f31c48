"""Read what our consumers accept from their sources at the versions we pin, and save it as small catalogues under
components/catalog/facts/consumers/ (one JSON file per consumer, with repository, tag and commit of every file read).

Flags: Go flag definitions (`fs.StringVar(&x, "name", ...)`, `flag.Bool("name", ...)`, pflag's `*VarP`, and a
package constant used as the name) in the files that register the consumer's command line, listed per consumer
below with the reason each file is on the list. Chart values: every key path of the chart's values.yaml at the
pinned tag, and every `.Values.<path>` its templates read.

Repositories come from local mirrors (bare git directories, e.g. what `git clone --mirror` gives), looked up as
<mirrors>/<owner>+<name>/repo. A tag missing from a mirror falls back to the newest earlier patch of the same
minor, recorded as such (`wanted`). Re-run after a version bump:

    python -m tools.extract_consumer_facts --mirrors <folder of git dirs, one per owner+name>

Tests (tests/test_consumer_flags.py, tests/test_chart_values_keys.py) read only the saved catalogues.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tools.consumer_facts.charts import Chart, PackagedChart, Subchart, extract_chart, extract_packaged_chart
from tools.consumer_facts.config_schemas import ConfigSchema, External, extract_config_schema
from tools.consumer_facts.flags import FlagConsumer, Source, ccm_controllers, extract_flags
from tools.consumer_facts.mirrors import git, mirror
from tools.facts_home import CONSUMERS, generator_of, write_facts

OUT = CONSUMERS
GENERATOR = generator_of(__file__)

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


_METAV1 = External("kubernetes/apimachinery", "k8s.io/apimachinery", "pkg/apis/meta/v1/types.go", "metav1.")
CONFIG_SCHEMAS = (
    ConfigSchema("kueue-configuration", "config.kueue.x-k8s.io/v1beta2", "Configuration", "kubernetes-sigs/kueue",
                 "v0.19.2", "apis/config/v1beta2/configuration_types.go",
                 (_METAV1, External("kubernetes/component-base", "k8s.io/component-base", "config/v1alpha1/types.go",
                                    "configv1alpha1.")),
                 "decoded strictly (pkg/config/config.go serializer.EnableStrict): an unknown field stops the manager"),
    ConfigSchema("kubelet-configuration", "kubelet.config.k8s.io/v1beta1", "KubeletConfiguration",
                 "kubernetes/kubelet", "kubernetes-1.36.4", "config/v1beta1/types.go", (_METAV1,),
                 "the kubelet's config file and kubeadm's kubelet-config and patches"),
    ConfigSchema("credential-provider-config", "kubelet.config.k8s.io/v1", "CredentialProviderConfig",
                 "kubernetes/kubelet", "kubernetes-1.36.4", "config/v1/types.go", (_METAV1,),
                 "--image-credential-provider-config"),
    ConfigSchema("kube-scheduler-configuration", "kubescheduler.config.k8s.io/v1", "KubeSchedulerConfiguration",
                 "kubernetes/kube-scheduler", "kubernetes-1.36.4", "config/v1/types.go",
                 (_METAV1, External("kubernetes/component-base", "k8s.io/component-base", "config/v1alpha1/types.go",
                                    "componentbaseconfigv1alpha1.")),
                 "kube-scheduler --config (plugin args are raw and not checked)"),
    ConfigSchema("audit-policy", "audit.k8s.io/v1", "Policy", "kubernetes/apiserver", "kubernetes-1.36.4",
                 "pkg/apis/audit/v1/types.go", (_METAV1,), "kube-apiserver --audit-policy-file"),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirrors", type=Path, required=True, help="a folder of git directories, <owner>+<name>/repo")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for consumer in FLAG_CONSUMERS:
        facts = extract_flags(args.mirrors, consumer)
        name = consumer.name.split(" ")[0]
        if name == "cloud-controller-manager":
            go_mod = git(mirror(args.mirrors, "kubernetes-sigs/cloud-provider-azure"), "show", "v1.36.5:go.mod")
            facts["controllers"] = ccm_controllers(args.mirrors, go_mod)
        write_facts(args.out / f"flags-{name}.json", GENERATOR, facts, indent=1)
        print(f"{name}: {len(facts['flags'])} flags from {len(facts['sources'])} files")
    for schema in CONFIG_SCHEMAS:
        facts = extract_config_schema(args.mirrors, schema)
        write_facts(args.out / f"config-{schema.name}.json", GENERATOR, facts, indent=1)
        print(f"{schema.name}: {len(facts['structs'])} structs")
    for packaged in PACKAGED_CHARTS:
        facts = extract_packaged_chart(args.mirrors, packaged)
        write_facts(args.out / f"values-{packaged.name}.json", GENERATOR, facts, indent=1)
        print(f"{packaged.name} {facts['tag']}: {len(facts['keys'])} values keys, "
              f"{len(facts['template_reads'])} template reads")
    for chart in CHARTS:
        facts = extract_chart(args.mirrors, chart)
        write_facts(args.out / f"values-{chart.name}.json", GENERATOR, facts, indent=1)
        print(f"{chart.name}: {len(facts['keys'])} values keys, {len(facts['template_reads'])} template reads")
    return 0


if __name__ == "__main__":
    sys.exit(main())
