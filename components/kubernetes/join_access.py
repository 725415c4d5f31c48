"""JoinAccess: the bootstrap tokens and what `kubeadm join` reads, applied as soon as the API servers answer.

Node pools depend on it, so a first `pulumi up` creates the control plane, waits for /readyz (the same wait
as the in-cluster layer, components/planning/first_up.py), declares the tokens, and only then creates the
scale sets whose machines join with them. The in-cluster layer has a provider of its own; this one exists
even with the layer off, since nodes cannot join without a token.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_command as command
import pulumi_kubernetes as k8s

from gpucluster.azure.bootstrap_token import BootstrapTokens
from gpucluster.kubernetes.declare import declare_all
from gpucluster.kubernetes.in_cluster import with_proxy
from gpucluster.kubernetes.objects.join import (
    SECRET_TYPE,
    cluster_info,
    cluster_info_kubeconfig,
    join_rbac,
    secret_name,
    token_string_data,
)
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.planning.pki import api_server_endpoint
from gpucluster.vocabulary import LABEL_PART_OF


@dataclass(frozen=True)
class JoinAccessArgs:
    """The inputs of JoinAccess."""

    plan: ClusterPlan
    """The cluster plan: the token slots (`plan.tokens`), the first-up path to the API servers (`plan.first_up`)."""
    tokens: BootstrapTokens
    """The bootstrap tokens whose Secrets it writes."""
    kubeconfig: pulumi.Output[str]
    """The admin kubeconfig the Kubernetes provider uses (secret)."""
    ca_pem: pulumi.Output[str]
    """The cluster CA's certificate: cluster-info carries it, the readiness wait trusts it."""


class JoinAccess(pulumi.ComponentResource):
    """What kubeadm join needs in the cluster before the first node boots: the bootstrap tokens' Secrets,
    cluster-info and kubeadm's join RBAC."""

    secrets: list[k8s.core.v1.Secret]
    """The two token slots' Secrets in kube-system."""

    def __init__(self, name: str, args: JoinAccessArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:kubernetes:JoinAccess", name, None, opts)
        plan, tokens, kubeconfig, ca_pem = args.plan, args.tokens, args.kubeconfig, args.ca_pem
        first_up = plan.first_up
        self.api_ready = command.local.Command(
            f"{name}-api-ready", create=first_up.script, interpreter=["/bin/bash", "-c"],
            environment=pulumi.Output.secret(ca_pem.apply(first_up.environment)),
            opts=pulumi.ResourceOptions(parent=self, depends_on=opts.depends_on if opts else None))
        self.provider = k8s.Provider(
            f"{name}-provider", kubeconfig=pulumi.Output.secret(kubeconfig.apply(
                lambda text: with_proxy(text, first_up.proxy_url))),
            enable_server_side_apply=True, opts=pulumi.ResourceOptions(parent=self, depends_on=[self.api_ready]))
        child = pulumi.ResourceOptions(parent=self, provider=self.provider)
        self.secrets = [
            k8s.core.v1.Secret(
                f"{name}-{period.slot}", type=SECRET_TYPE,
                metadata=k8s.meta.v1.ObjectMetaArgs(name=token_id.apply(secret_name), namespace="kube-system",
                                                    labels={LABEL_PART_OF: "gpucluster"}),
                string_data=token_string_data(token_id, token_secret, period), opts=child)
            for period, (token_id, token_secret) in zip(plan.tokens.slots, tokens.slots, strict=True)]
        server = f"https://{api_server_endpoint(plan.spec.name)}"
        self.rbac = declare_all(join_rbac(), child)
        self.cluster_info = declare_all([cluster_info(ca_pem.apply(lambda pem: cluster_info_kubeconfig(server, pem)))],
                                        child)
        self.register_outputs({"bootstrapTokenSecrets": len(self.secrets), "clusterInfo": len(self.cluster_info)})
