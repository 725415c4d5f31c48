"""Every certificate of the cluster with who issues it, and the warnings `pulumi preview` prints before one
expires. docs/pki.md has one row per certificate named here (tests/test_pki_lifetimes.py holds them together).

Pure. Pulumi issues the CAs and the shared leaves (components/azure/pki.py); kubeadm issues the API server's
serving certificate and the control-plane kubeconfigs on each API server; kube-controller-manager signs the
kubelets' client and serving certificates from their CSRs.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from gpucluster.planning.control_plane import ControlPlanePlan
from gpucluster.planning.ip_plan import IpPlan
from gpucluster.planning.pki import CLUSTER_CA, ETCD_CA, FRONT_PROXY_CA, plan_certificates

CA_NAMES = (CLUSTER_CA, ETCD_CA, FRONT_PROXY_CA)
KUBEADM_ISSUED = ("apiserver", "admin.conf", "super-admin.conf", "controller-manager.conf", "scheduler.conf")
"""What `kubeadm init`'s certs and kubeconfig phases write on each API server and `kubeadm certs renew all`
renews (with external etcd: kubernetes `cmd/kubeadm/app/phases/certs/certlist.go`, `GetCertsWithoutEtcd`, and
the kubeconfig files of `cmd/kubeadm/app/phases/renewal`)."""
KUBELET_ISSUED = ("kubelet-client", "kubelet-serving")
"""Signed by kube-controller-manager from the kubelet's CSRs (kubernetes.io/kube-apiserver-client-kubelet and
kubernetes.io/kubelet-serving), on every node and API server."""

CA_WARN = timedelta(days=2 * 365)
"""A CA warns two years ahead: pulumi-tls replaces it a year before it expires (`early_renewal_hours`,
components/azure/pki.py), which re-issues every certificate and breaks every running machine's trust."""
LEAF_WARN = timedelta(days=30)
"""A Pulumi-issued leaf warns when it enters its early-renewal window: this `pulumi up` replaces it."""


def certificate_names(cluster: str, ip: IpPlan, cp: ControlPlanePlan) -> tuple[str, ...]:
    """Every certificate of the cluster, by the name docs/pki.md gives it."""
    return (*CA_NAMES, *(c.name for c in plan_certificates(cluster, ip, cp)), *KUBEADM_ISSUED, *KUBELET_ISSUED)


def expiry_warning(name: str, is_ca: bool, end: datetime, now: datetime) -> str | None:
    left = end - now
    if is_ca and left <= CA_WARN:
        return (f"certificate authority {name} expires {end:%Y-%m-%d} ({left.days} days): pulumi-tls replaces it "
                "a year before, which breaks every machine's trust; plan its rotation (docs/pki.md, CA rotation)")
    if not is_ca and left <= LEAF_WARN:
        return (f"certificate {name} expires {end:%Y-%m-%d} ({left.days} days): this `pulumi up` issues a new one "
                "for new machines; running machines renew their own copy (docs/pki.md)")
    return None
