"""cloud-init for one etcd member: static bootstrap, TLS everywhere, data on the fast disk, snapshots to blob.

Pure text. The certificates and keys come in as strings, so the rendered document is a secret.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml

ETCD_VERSION = "3.6.14"
"""As the version table pins it for the minor (components/catalog/versions.py: kubeadm maps 1.34-1.36 to 3.6)."""
DATA_DIR = "/var/lib/etcd"
PKI_DIR = "/etc/etcd/pki"


@dataclass(frozen=True)
class EtcdMember:
    name: str
    address: str


@dataclass(frozen=True)
class EtcdBootstrap:
    member: EtcdMember
    cluster: tuple[EtcdMember, ...]
    cluster_token: str
    quota_backend_bytes: int
    data_on_nvme: bool
    ca_cert: str
    server_cert: str
    server_key: str
    peer_cert: str
    peer_key: str
    snapshot_url: str
    """https://<account>.blob.core.windows.net/<container>: snapshots go there with the VM's managed identity."""


def etcd_flags(b: EtcdBootstrap) -> list[str]:
    m = b.member
    initial = ",".join(f"{p.name}=https://{p.address}:2380" for p in b.cluster)
    return [
        f"--name={m.name}",
        f"--data-dir={DATA_DIR}",
        f"--listen-client-urls=https://{m.address}:2379,https://127.0.0.1:2379",
        f"--advertise-client-urls=https://{m.address}:2379",
        f"--listen-peer-urls=https://{m.address}:2380",
        f"--initial-advertise-peer-urls=https://{m.address}:2380",
        f"--initial-cluster={initial}",
        "--initial-cluster-state=new",
        f"--initial-cluster-token={b.cluster_token}",
        "--client-cert-auth=true",
        f"--trusted-ca-file={PKI_DIR}/ca.crt",
        f"--cert-file={PKI_DIR}/server.crt",
        f"--key-file={PKI_DIR}/server.key",
        "--peer-client-cert-auth=true",
        f"--peer-trusted-ca-file={PKI_DIR}/ca.crt",
        f"--peer-cert-file={PKI_DIR}/peer.crt",
        f"--peer-key-file={PKI_DIR}/peer.key",
        f"--quota-backend-bytes={b.quota_backend_bytes}",
        "--auto-compaction-mode=periodic",
        "--auto-compaction-retention=1h",
        "--snapshot-count=10000",
        "--listen-metrics-urls=http://127.0.0.1:2381",
    ]


def _unit(b: EtcdBootstrap) -> str:
    flags = " \\\n  ".join(etcd_flags(b))
    return ("[Unit]\nDescription=etcd\nAfter=network-online.target local-fs.target\nWants=network-online.target\n\n"
            f"[Service]\nType=notify\nExecStart=/usr/local/bin/etcd \\\n  {flags}\nRestart=always\nRestartSec=5\n"
            "LimitNOFILE=65536\nIOSchedulingClass=realtime\nIOSchedulingPriority=0\n\n"
            "[Install]\nWantedBy=multi-user.target\n")


def _install(b: EtcdBootstrap) -> str:
    disk = ("# Local NVMe: format once and mount as the data dir (lost with the VM; the member is then replaced).\n"
            "dev=$(ls /dev/nvme*n1 | head -n1)\n") if b.data_on_nvme else (
            "# Premium SSD v2 data disk at LUN 0.\ndev=/dev/disk/azure/scsi1/lun0\n")
    return "\n".join([
        "#!/bin/bash", "set -euo pipefail", disk.rstrip(),
        'blkid "$dev" || mkfs.ext4 -F "$dev"',
        f"mkdir -p {DATA_DIR}",
        f'grep -q " {DATA_DIR} " /etc/fstab || echo "$dev {DATA_DIR} ext4 defaults,noatime 0 2" >> /etc/fstab',
        f"mount -a && chmod 700 {DATA_DIR}",
        f"url=https://github.com/etcd-io/etcd/releases/download/v{ETCD_VERSION}/etcd-v{ETCD_VERSION}-linux-amd64.tar.gz",
        'curl -fsSL "$url" | tar -xz -C /usr/local/bin --strip-components=1 --wildcards "*/etcd" "*/etcdctl" "*/etcdutl"',
        "",
    ])


def _snapshot_script(b: EtcdBootstrap) -> str:
    return "\n".join([
        "#!/bin/bash",
        "set -euo pipefail",
        f"snap=/tmp/{b.member.name}-$(date -u +%Y%m%dT%H%M%SZ).db",
        f"ETCDCTL_API=3 etcdctl --endpoints=https://127.0.0.1:2379 --cacert={PKI_DIR}/ca.crt "
        f"--cert={PKI_DIR}/server.crt --key={PKI_DIR}/server.key snapshot save \"$snap\"",
        "token=$(curl -fsS -H Metadata:true "
        "'http://169.254.169.254/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https://storage.azure.com/'"
        " | sed -E 's/.*\"access_token\":\"([^\"]+)\".*/\\1/')",
        "gzip -f \"$snap\"",
        f"curl -fsS -X PUT -H \"Authorization: Bearer $token\" -H 'x-ms-version: 2021-08-06' "
        f"-H 'x-ms-blob-type: BlockBlob' --data-binary @\"$snap.gz\" \"{b.snapshot_url}/$(basename \"$snap\").gz\"",
        "rm -f \"$snap.gz\"",
        "",
    ])


def render_etcd_cloud_init(b: EtcdBootstrap) -> str:
    files = [
        (f"{PKI_DIR}/ca.crt", "0644", b.ca_cert),
        (f"{PKI_DIR}/server.crt", "0644", b.server_cert),
        (f"{PKI_DIR}/server.key", "0600", b.server_key),
        (f"{PKI_DIR}/peer.crt", "0644", b.peer_cert),
        (f"{PKI_DIR}/peer.key", "0600", b.peer_key),
        ("/usr/local/sbin/gpucluster-etcd-install", "0755", _install(b)),
        ("/etc/systemd/system/etcd.service", "0644", _unit(b)),
        ("/usr/local/sbin/gpucluster-etcd-snapshot", "0755", _snapshot_script(b)),
        ("/etc/systemd/system/etcd-snapshot.service", "0644",
         "[Unit]\nDescription=etcd snapshot to blob storage\n\n[Service]\nType=oneshot\n"
         "ExecStart=/usr/local/sbin/gpucluster-etcd-snapshot\n"),
        ("/etc/systemd/system/etcd-snapshot.timer", "0644",
         "[Unit]\nDescription=hourly etcd snapshot\n\n[Timer]\nOnCalendar=hourly\nRandomizedDelaySec=600\n"
         "Persistent=true\n\n[Install]\nWantedBy=timers.target\n"),
    ]
    document = {
        "write_files": [{"path": p, "permissions": mode, "content": content} for p, mode, content in files],
        "runcmd": [
            ["/usr/local/sbin/gpucluster-etcd-install"],
            ["systemctl", "daemon-reload"],
            ["systemctl", "enable", "--now", "etcd.service", "etcd-snapshot.timer"],
        ],
    }
    return "#cloud-config\n" + yaml.safe_dump(document, sort_keys=False)
