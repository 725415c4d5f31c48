"""InCluster: everything applied through the control plane's admin kubeconfig, as one layer.

The layer needs an API server that answers. A readiness wait (a local command where `pulumi up` runs,
polling the API servers' /readyz through the internal load balancer) comes before the Kubernetes
provider, so a first `pulumi up` creates the VMs, waits for the control plane, then applies the layer
(docs/operations.md, first bootstrap).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_command as command
import pulumi_kubernetes as k8s
import yaml

from gpucluster.azure.addon_identities import AddonAzureRefs
from gpucluster.bootstrap.cloud_config import safe_yaml
from gpucluster.catalog.in_cluster import CILIUM_VERSION
from gpucluster.kubernetes.capacity import Capacity, CapacityArgs
from gpucluster.kubernetes.declare import declare_all, declare_staged
from gpucluster.kubernetes.gpu_health import GpuHealth, GpuHealthArgs
from gpucluster.kubernetes.networking import Networking, NetworkingArgs
from gpucluster.kubernetes.objects.flowcontrol import flowcontrol_objects, node_agent_accounts
from gpucluster.kubernetes.objects.layer import csr_objects, imds_objects, telemetry_objects
from gpucluster.kubernetes.objects.node_agents import has_rack_pools, layer_daemonsets
from gpucluster.kubernetes.rack_devices import RackDevices, RackDevicesArgs
from gpucluster.kubernetes.readiness_gate import CILIUM_GATE
from gpucluster.kubernetes.scheduling import Scheduling, SchedulingArgs
from gpucluster.planning.cluster_plan import ClusterPlan


def with_proxy(kubeconfig: str, proxy_url: str | None) -> str:
    """client-go reads `proxy-url` on a kubeconfig cluster (socks5, http, https): the provider reaches the
    internal load balancer through the jump host's proxy."""
    if not proxy_url:
        return kubeconfig
    document = yaml.safe_load(kubeconfig)
    for cluster in document["clusters"]:
        cluster["cluster"]["proxy-url"] = proxy_url
    return yaml.safe_dump(document, sort_keys=False)


def render_yaml(value: Any) -> pulumi.Output[str]:
    """YAML text of a value holding Pulumi outputs (the shards' remote-write URL and identity), once they resolve."""
    return pulumi.Output.from_input(value).apply(safe_yaml)


@dataclass(frozen=True)
class TelemetryRefs:
    """Where the edge Prometheus shards write and as whom (components/azure/metrics_workspace.py)."""

    remote_write_url: pulumi.Output[str]
    client_id: pulumi.Output[str]


@dataclass(frozen=True)
class InClusterArgs:
    """The inputs of InCluster."""

    plan: ClusterPlan
    """The cluster plan: scheduling, add-ons, versions, the first-up path to the API servers."""
    kubeconfig: pulumi.Output[str]
    """The admin kubeconfig the Kubernetes provider uses (secret)."""
    ca_pem: pulumi.Input[str]
    """The cluster CA's certificate (the readiness wait trusts it)."""
    addon_refs: AddonAzureRefs
    """The add-ons' Azure identities and where the cluster lives (AddonIdentities.refs)."""
    telemetry: TelemetryRefs | None = None
    """Where the edge Prometheus shards write; None: no metrics pipeline (`metrics` off)."""


class InCluster(pulumi.ComponentResource):
    """The in-cluster layer: flow control, scheduling and Kueue, pod networking, capacity, health, metrics."""

    provider: k8s.Provider
    """The Kubernetes provider every object goes through (it waits for the API servers)."""
    scheduling: Scheduling
    """Priority classes, Kueue and its queues."""

    def __init__(self, name: str, args: InClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:kubernetes:InCluster", name, None, opts)
        plan, kubeconfig, ca_pem, addon_refs, telemetry = (args.plan, args.kubeconfig, args.ca_pem, args.addon_refs,
                                                            args.telemetry)
        first_up = plan.first_up
        # Runs where `pulumi up` runs, after the control plane and node pools exist: blocks until /readyz answers.
        self.api_ready = command.local.Command(
            f"{name}-api-ready", create=first_up.script, interpreter=["/bin/bash", "-c"],
            environment=pulumi.Output.secret(pulumi.Output.from_input(ca_pem).apply(first_up.environment)),
            opts=pulumi.ResourceOptions(parent=self, depends_on=opts.depends_on if opts else None))
        # Every object goes through the provider, so the provider carries the wait for the control plane.
        self.provider = k8s.Provider(
            f"{name}-provider", kubeconfig=pulumi.Output.secret(kubeconfig.apply(
                lambda text: with_proxy(text, first_up.proxy_url))),
            enable_server_side_apply=True, opts=pulumi.ResourceOptions(parent=self, depends_on=[self.api_ready]))
        child = pulumi.ResourceOptions(parent=self, provider=self.provider)
        # First: the node agents' own APF level and the break-glass schema hold before any agent starts.
        self.flow_control = declare_all(flowcontrol_objects(node_agent_accounts(layer_daemonsets(plan),
                                                                                  has_rack_pools(plan))), child)
        # Then what admission needs before the pods that use it, behind no gate: the priority classes (the prefix IPAM
        # controller and CoreDNS run at gpucluster-system, and Cilium's agents wait for the controller's addresses).
        # Each component's namespaces and service accounts come first within it (declare.py declare_staged).
        self.scheduling = Scheduling(f"{name}-scheduling", SchedulingArgs(
            plan=plan.scheduling, settings=plan.spec.in_cluster, registry=plan.registry, minor=plan.versions.minor),
            child)
        classes = self.scheduling.priority_classes
        self.networking = Networking(f"{name}-networking", NetworkingArgs(plan=plan, addon_refs=addon_refs, after=classes),
                                     child)
        # What the gate watches stays visible in the plan; the endpoint and the admin credentials are secret.
        gate_env = kubeconfig.apply(lambda text: CILIUM_GATE.environment(text, first_up.proxy_url))
        # Cilium's release does not wait (objects/releases.py): this gate does, for most of the nodes, and what needs
        # pod networking comes after it. A new Cilium version gates again.
        self.cni_ready = command.local.Command(
            f"{name}-cni-ready", create=CILIUM_GATE.script, interpreter=["/bin/bash", "-c"],
            environment={**CILIUM_GATE.public(), **{
                key: pulumi.Output.secret(gate_env.apply(lambda env, key=key: env[key]))
                for key in CILIUM_GATE.secret_keys(first_up.proxy_url)}},
            triggers=[CILIUM_VERSION],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.networking.cni]))
        after_cni = [self.cni_ready, *classes]
        self.scheduling.install_kueue(after_cni)
        # The autoscaler watches ProvisioningRequests from its start.
        self.capacity = Capacity(f"{name}-capacity", CapacityArgs(
            plan=plan, addon_refs=addon_refs, after=[*after_cni, self.scheduling.provisioning_crd]), child)
        self.csr_approver = declare_staged(csr_objects(plan), child, after_cni)
        self.gpu_health = GpuHealth(f"{name}-gpu-health", GpuHealthArgs(plan=plan, after=after_cni), child)
        # Cilium's agents are Ready past the gate, so cilium-operator has registered its policy CRDs (the agent waits
        # for them at start; cilium `pkg/k8s/apis/cilium.io/client` RegisterCRDs is the operator's).
        self.imds_guard = declare_staged(imds_objects(plan), child, after_cni)
        # Metrics: node_exporter, kube-state-metrics and the edge Prometheus shards (docs/metrics.md).
        self.telemetry = declare_staged(telemetry_objects(plan, telemetry.remote_write_url, telemetry.client_id,
                                                          render_yaml), child, after_cni) \
            if telemetry is not None else []
        # NVLink racks: ComputeDomains and InfiniBand NICs through DRA, on rack nodes only.
        self.rack_devices = RackDevices(f"{name}-rack-devices", RackDevicesArgs(plan=plan, after=after_cni), child) \
            if has_rack_pools(plan) else None
        self.register_outputs({"cniGate": self.cni_ready.id, "telemetryObjects": len(self.telemetry)})
