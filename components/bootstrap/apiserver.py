"""cloud-init for an API-server VM: kubeadm with external etcd, pre-made CAs and client certificates, the scale flags.

Every instance of the scale set is identical and stateless: it writes the CAs and the shared client
certificates, then runs kubeadm init. kubeadm's certs phase issues this VM's own API-server serving
certificate (its SANs must name the VM's address: the controller-manager's and scheduler's kubeconfigs
dial localAPIEndpoint, `getKubeConfigSpecsBase` in kubernetes `cmd/kubeadm/app/phases/kubeconfig/kubeconfig.go`)
and reuses every certificate it finds; with external etcd it skips the etcd CA and certificates
(`runCAPhase`/`runCertPhase`, `cmd/kubeadm/app/cmd/phases/init/certs.go`).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.bootstrap.boot_unit import MARKER_DIR, done_lines, start_unit
from gpucluster.bootstrap.boot_unit import boot_unit as make_unit
from gpucluster.bootstrap.cert_renewal import TIMER, apiserver_renew_script, renewal_files
from gpucluster.bootstrap.cloud_config import dump_cloud_config, safe_yaml, safe_yaml_all
from gpucluster.bootstrap.host_prep import RETRY_FUNCTION, boot_jitter, hosts_entry, kernel_checks, provider_id_script
from gpucluster.bootstrap.registry import RegistryBoot, kubelet_args, registry_files
from gpucluster.bootstrap.scheduler import SCHEDULER_CONFIG_PATH, scheduler_configuration
from gpucluster.planning.control_plane import ApiServerFlags
from gpucluster.planning.taints import NodeTaint

AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        # High-volume, low-value reads first: they dominate at 7,500 nodes.
        {"level": "None", "verbs": ["get", "list", "watch"]},
        {"level": "None", "resources": [{"group": "", "resources": ["events"]}]},
        {"level": "None", "users": ["system:kube-proxy"]},
        {"level": "Metadata", "resources": [{"group": "", "resources": ["secrets", "configmaps"]}]},
        {"level": "Metadata"},
    ],
}


PATCHES_DIR = "/etc/kubernetes/patches"
"""kubeadm's patches (`target[suffix][+patchtype].extension`): the kubelet's providerID patch lands here at boot."""
KUBEADM_CONFIG = "/etc/kubernetes/kubeadm.yaml"
BOOT_SCRIPT = "/usr/local/sbin/gpucluster-apiserver-boot"
BOOT_UNIT = "gpucluster-apiserver-boot.service"
INITIALISED_MARKER = f"{MARKER_DIR}/initialised"
SKIP_PHASES = "preflight,etcd,addon/kube-proxy,addon/coredns,upload-certs,bootstrap-token,show-join-command"
"""kube-proxy: Cilium replaces it. CoreDNS: the in-cluster layer runs it, spread over zones. etcd is external.
The certs phase runs: it issues this VM's serving certificate. bootstrap-token: it would write the token's
expiry as now + ttl at every boot; the stack declares the tokens, cluster-info and kubeadm's join RBAC instead
(components/kubernetes/objects/join.py). show-join-command would print the random token kubeadm defaults an
empty `bootstrapTokens` to (`SetDefaults_BootstrapTokens`), which is never registered."""
INIT_ATTEMPTS = 3
BOOT_SPREAD_SECONDS = 30
"""A random wait before the first network fetch (IMDS, then etcd and the other API servers)."""


@dataclass(frozen=True)
class ApiServerBootstrap:
    cluster: str
    kubernetes_version: str
    endpoint: str
    """controlPlaneEndpoint, `<name>:<port>`: the name resolves to 127.0.0.1 on API-server VMs."""
    service_cidr: str
    etcd_endpoints: tuple[str, ...]
    events_etcd_endpoints: tuple[str, ...]
    flags: ApiServerFlags
    pki_files: dict[str, str]
    """Path under /etc/kubernetes/pki -> PEM text."""
    cert_sans: tuple[str, ...] = ()
    """Extra names and addresses for kubeadm's serving certificate (the load balancer's IP, loopback)."""
    taints: tuple[NodeTaint, ...] = ()
    """What the API servers register with (kubeadm's control-plane taint)."""

    @property
    def endpoint_host(self) -> str:
        return self.endpoint.rsplit(":", 1)[0]
    registry: RegistryBoot | None = None
    """The cluster's registry: kubeadm's control-plane images come from it, pulled with the machine's identity."""


def _args(pairs: dict[str, str]) -> list[dict[str, str]]:
    return [{"name": k, "value": v} for k, v in pairs.items()]


def kubeadm_config(b: ApiServerBootstrap) -> list[dict[str, object]]:
    api_args = {
        "max-requests-inflight": str(b.flags.max_requests_inflight),
        "max-mutating-requests-inflight": str(b.flags.max_mutating_requests_inflight),
        "goaway-chance": str(b.flags.goaway_chance),
        "audit-policy-file": "/etc/kubernetes/audit-policy.yaml",
        "audit-log-path": "/var/log/kubernetes/audit.log",
        "audit-log-maxage": "7",
        "audit-log-maxbackup": "10",
        "audit-log-maxsize": "512",
        "profiling": "false",
        # Verify kubelets' serving certificates (logs, exec, port-forward): the cluster CA signs them.
        "kubelet-certificate-authority": "/etc/kubernetes/pki/ca.crt",
        # Watch caches are sized dynamically since 1.19; API Priority and Fairness is on by default.
    }
    if b.events_etcd_endpoints:
        api_args["etcd-servers-overrides"] = "/events#" + ";".join(b.events_etcd_endpoints)
    init = {
        "apiVersion": "kubeadm.k8s.io/v1beta4",
        "kind": "InitConfiguration",
        "nodeRegistration": {"taints": [{"key": t.key, **({"value": t.value} if t.value else {}), "effect": t.effect}
                                        for t in b.taints],
                             **({"kubeletExtraArgs": kubelet_args()} if b.registry else {})},
        "patches": {"directory": PATCHES_DIR},
        # etcd members boot in parallel with the API servers: give the first API server time to find a quorum.
        "timeouts": {"controlPlaneComponentHealthCheck": "15m0s"},
    }
    cluster = {
        "apiVersion": "kubeadm.k8s.io/v1beta4",
        "kind": "ClusterConfiguration",
        "clusterName": b.cluster,
        "kubernetesVersion": f"v{b.kubernetes_version}",
        "controlPlaneEndpoint": b.endpoint,
        # kubeadm names the static pods' images <imageRepository>/kube-apiserver:<version> (and so on): the
        # registry's registry.k8s.io prefix. Preflight (which would pull without credentials) is skipped.
        **({"imageRepository": f"{b.registry.login_server}/{_k8s_prefix(b.registry)}"} if b.registry else {}),
        "networking": {"serviceSubnet": b.service_cidr, "dnsDomain": "cluster.local"},
        "etcd": {"external": {"endpoints": list(b.etcd_endpoints), "caFile": "/etc/kubernetes/pki/etcd/ca.crt",
                              "certFile": "/etc/kubernetes/pki/apiserver-etcd-client.crt",
                              "keyFile": "/etc/kubernetes/pki/apiserver-etcd-client.key"}},
        "apiServer": {
            "certSANs": list(b.cert_sans),
            "extraArgs": _args(api_args),
            "extraVolumes": [
                {"name": "audit-policy", "hostPath": "/etc/kubernetes/audit-policy.yaml",
                 "mountPath": "/etc/kubernetes/audit-policy.yaml", "readOnly": True, "pathType": "File"},
                {"name": "audit-log", "hostPath": "/var/log/kubernetes", "mountPath": "/var/log/kubernetes",
                 "pathType": "DirectoryOrCreate"},
            ],
        },
        # Pod IPs come from the NICs, not from per-node CIDRs.
        "controllerManager": {"extraArgs": _args({"allocate-node-cidrs": "false", "kube-api-qps": "300",
                                                  "kube-api-burst": "400"})},
        # The scheduler reads its profile (MostAllocated) and client limits from the file.
        "scheduler": {
            "extraArgs": _args({"config": SCHEDULER_CONFIG_PATH}),
            "extraVolumes": [{"name": "scheduler-config", "hostPath": SCHEDULER_CONFIG_PATH,
                              "mountPath": SCHEDULER_CONFIG_PATH, "readOnly": True, "pathType": "File"}],
        },
    }
    # kubeadm uploads this to the kubelet-config ConfigMap every kubelet reads (kubeadm docs, "Certificate
    # Management with kubeadm", Kubelet serving certificates); nodes also set it in their patch.
    kubelet = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
               "serverTLSBootstrap": True, "failCgroupV1": True}
    return [init, cluster, kubelet]


def _k8s_prefix(registry: RegistryBoot) -> str:
    return next(m.prefix for m in registry.mirrors if m.upstream == "registry.k8s.io")


def boot_script(b: ApiServerBootstrap) -> str:
    """Everything the VM does at first boot, under `set -euo pipefail` (a failed step stops the boot). The image
    carries kubelet, kubeadm, containerd and the control-plane images (docs/images.md): nothing is installed.

    The scheduler is kubeadm's stock kube-scheduler static pod, which runs as root (kubeadm's
    RootlessControlPlane feature gate is off by default), so the 0600 root kubeconfig kubeadm writes is readable
    by it as it is."""
    return "\n".join([
        "#!/bin/bash",
        "set -euo pipefail",
        RETRY_FUNCTION,
        *kernel_checks(),
        *hosts_entry("127.0.0.1", b.endpoint_host),
        boot_jitter(BOOT_SPREAD_SECONDS),
        *provider_id_script(),
        f"retry {INIT_ATTEMPTS} kubeadm init --config {KUBEADM_CONFIG} --skip-phases={SKIP_PHASES}",
        "systemctl daemon-reload",
        f"systemctl enable --now {TIMER}",
        *done_lines(INITIALISED_MARKER),
        'echo "gpucluster: API server initialised at $(date -u +%FT%TZ)"',
        "",
    ])


def boot_unit() -> str:
    """The boot script as a re-runnable unit (components/bootstrap/boot_unit.py), after containerd: kubeadm init
    talks to the CRI socket."""
    return make_unit("prepare this machine and initialise the API server", BOOT_SCRIPT, INITIALISED_MARKER,
                     after=("containerd.service",))


def render_apiserver_cloud_init(b: ApiServerBootstrap) -> str:
    files = [{"path": f"/etc/kubernetes/pki/{path}", "permissions": "0600" if path.endswith(".key") else "0644",
              "content": pem} for path, pem in sorted(b.pki_files.items())]
    files += [
        {"path": KUBEADM_CONFIG, "permissions": "0600",
         "content": safe_yaml_all(kubeadm_config(b))},
        {"path": "/etc/kubernetes/audit-policy.yaml", "permissions": "0644",
         "content": safe_yaml(AUDIT_POLICY)},
        {"path": SCHEDULER_CONFIG_PATH, "permissions": "0644",
         "content": safe_yaml(scheduler_configuration())},
        {"path": BOOT_SCRIPT, "permissions": "0755", "content": boot_script(b)},
        {"path": f"/etc/systemd/system/{BOOT_UNIT}", "permissions": "0644", "content": boot_unit()},
    ]
    if b.registry:
        files += registry_files(b.registry)
    files += renewal_files(apiserver_renew_script())
    document = {"write_files": files, "runcmd": start_unit(BOOT_UNIT)}
    return dump_cloud_config(document)
