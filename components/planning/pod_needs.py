"""What a pod needs before it can run, read from the rendered pod spec itself (never declared beside it).

Pure. Each rule is the consumer's, cited where it is encoded:
- its resolver: kubelet `pkg/kubelet/network/dns/dns.go` `getPodDNSType` (kubernetes v1.36): `ClusterFirstWithHostNet`
  is cluster DNS; `ClusterFirst` is cluster DNS unless the pod is on the host network, where it falls back to
  `Default`; `Default` is the node's resolver (the kubelet's `resolvConf`); `None` only what `dnsConfig` says.
  An unset policy is `ClusterFirst` (kube-apiserver's defaulting, `pkg/apis/core/v1/defaults.go` SetDefaults_PodSpec).
"""

from __future__ import annotations

from typing import Any, Literal

DnsType = Literal["cluster", "host", "none"]
CLUSTER_FIRST = "ClusterFirst"


def dns_type(pod: dict[str, Any]) -> DnsType:
    """Where the pod's /etc/resolv.conf points, as the kubelet writes it."""
    policy = pod.get("dnsPolicy") or CLUSTER_FIRST
    if policy == "None":
        return "none"
    if policy == "ClusterFirstWithHostNet":
        return "cluster"
    if policy == CLUSTER_FIRST and not pod.get("hostNetwork"):
        return "cluster"
    if policy in (CLUSTER_FIRST, "Default"):
        return "host"
    raise ValueError(f"dnsPolicy {policy!r} is not one kube-apiserver accepts")


def needs_cluster_dns(pod: dict[str, Any], cluster_dns_ip: str | None = None) -> bool:
    """Its names resolve only through the cluster's DNS Service (CoreDNS): it waits for CoreDNS to answer.
    With `dnsPolicy: None`, only if its `dnsConfig.nameservers` name the cluster's DNS address."""
    kind = dns_type(pod)
    if kind == "none":
        return cluster_dns_ip is not None and cluster_dns_ip in ((pod.get("dnsConfig") or {}).get("nameservers") or [])
    return kind == "cluster"
