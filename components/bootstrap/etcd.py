"""cloud-init for one etcd member: static bootstrap, TLS everywhere, data on the fast disk, snapshots to blob.

Pure text. The certificates and keys come in as strings, so the rendered document is a secret.

A member whose data directory is empty (local NVMe is wiped when a VM is deallocated or its host is
redeployed; a replaced VM starts blank) decides at each start how to come up, in `run_script`:
- its peers answer: the cluster exists, so it removes its old self from the membership, adds itself
  again, and starts with `--initial-cluster-state=existing` (etcd's runtime-reconfiguration procedure,
  etcd `Documentation/op-guide/runtime-configuration.md`: "replace a failed machine");
- no peer answers and this VM never ran etcd before: the first bootstrap, `--initial-cluster-state=new`;
- no peer answers but this VM had started etcd before: every member lost its data; it refuses to start
  an empty cluster (the API would come up empty) and asks for a restore from a snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.bootstrap.boot_unit import MARKER_DIR, done_lines, start_unit
from gpucluster.bootstrap.boot_unit import boot_unit as make_unit
from gpucluster.bootstrap.cert_renewal import TIMER, etcd_renew_script, renewal_files
from gpucluster.bootstrap.cloud_config import dump_cloud_config
from gpucluster.bootstrap.host_prep import RETRY_FUNCTION

DATA_DIR = "/var/lib/etcd"
PKI_DIR = "/etc/etcd/pki"
BIN_DIR = "/usr/local/bin"
STATE_DIR = "/var/lib/gpucluster"
"""On the OS disk: survives the loss of the NVMe data disk, so a member knows it ran before."""
STARTED_MARKER = f"{STATE_DIR}/etcd-started"
RUN_SCRIPT = "/usr/local/sbin/gpucluster-etcd-run"
SNAPSHOT_SCRIPT = "/usr/local/sbin/gpucluster-etcd-snapshot"
DEFRAG_SCRIPT = "/usr/local/sbin/gpucluster-etcd-defrag"
DEFRAG_SCHEDULE = "*-*-* 04:17:00"
"""Daily, the same time on every member: only the member that is the leader then acts (`defrag_script`)."""
DEFRAG_TIMEOUT = "10m"
"""Defragmentation rewrites the whole file and blocks the member meanwhile (etcd v3.6 op-guide/maintenance.md)."""
BOOT_SCRIPT = "/usr/local/sbin/gpucluster-etcd-boot"
BOOT_UNIT = "gpucluster-etcd-boot.service"
ENABLED_MARKER = f"{MARKER_DIR}/etcd-enabled"
SNAPSHOT_WORK = "/var/lib/gpucluster/snapshot"
"""Where a snapshot is written, compressed and cut into blocks; emptied at the start and the end of every run."""
SNAPSHOT_BLOCK = "100M"
"""Put Block size: Azure takes up to 4000 MiB a block and 50,000 blocks a blob (Blob service REST API, Put Block)."""
BLOB_API_VERSION = "2021-08-06"
IMDS_TOKEN = ("http://169.254.169.254/metadata/identity/oauth2/token?api-version=2018-02-01"
              "&resource=https://storage.azure.com/")
DISK_SCRIPT = "/usr/local/sbin/gpucluster-etcd-disk"
DISK_UNIT = "gpucluster-etcd-disk.service"
CLIENT_PORT, PEER_PORT, METRICS_PORT = 2379, 2380, 2381


@dataclass(frozen=True)
class EtcdMember:
    name: str
    address: str
    client_port: int = CLIENT_PORT
    peer_port: int = PEER_PORT

    @property
    def client_url(self) -> str:
        return f"https://{self.address}:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"https://{self.address}:{self.peer_port}"


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
    client_cert: str = ""
    client_key: str = ""
    """The clientAuth certificate etcdctl presents (snapshots, membership); etcd's own gRPC gateway presents the
    serving certificate, which carries clientAuth too (components/planning/pki.py)."""
    metrics_port: int = METRICS_PORT
    ca_key: str = ""
    """The etcd CA's key, for the member's certificate renewal timer (components/bootstrap/cert_renewal.py);
    the components always pass it."""


def etcd_flags(b: EtcdBootstrap) -> list[str]:
    """Every flag but `--initial-cluster-state`, which `run_script` decides at each start."""
    m = b.member
    initial = ",".join(f"{p.name}={p.peer_url}" for p in b.cluster)
    listen_clients = ",".join(dict.fromkeys([m.client_url, f"https://127.0.0.1:{m.client_port}"]))
    return [
        f"--name={m.name}",
        f"--data-dir={DATA_DIR}",
        f"--listen-client-urls={listen_clients}",
        f"--advertise-client-urls={m.client_url}",
        f"--listen-peer-urls={m.peer_url}",
        f"--initial-advertise-peer-urls={m.peer_url}",
        f"--initial-cluster={initial}",
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
        # /metrics and /health only (no keyspace), plain HTTP: on loopback for the member itself and on its own
        # address for a scraper on the system pool (NSG rule allow-etcd-metrics-from-system, docs/control-plane.md).
        "--listen-metrics-urls=" + ",".join(dict.fromkeys(
            [f"http://127.0.0.1:{b.metrics_port}", f"http://{m.address}:{b.metrics_port}"])),
    ]


def etcdctl_command(endpoints: str, timeout: str = "10s") -> str:
    """etcdctl as a client of the cluster, with the clientAuth certificate."""
    return (f"ETCDCTL_API=3 {BIN_DIR}/etcdctl --endpoints={endpoints} --cacert={PKI_DIR}/ca.crt "
            f"--cert={PKI_DIR}/client.crt --key={PKI_DIR}/client.key --command-timeout={timeout}")


def run_script(b: EtcdBootstrap) -> str:
    """The unit's ExecStart: decide new / existing for an empty data dir, rejoin if needed, exec etcd.

    "The cluster answers" means a peer passes `endpoint health`, a quorum read: during the first
    bootstrap no peer has a quorum yet, so no member mistakes a forming cluster for an existing one."""
    m = b.member
    peers = " ".join(p.client_url for p in b.cluster if p.name != m.name)
    flags = " \\\n  ".join(etcd_flags(b))
    return "\n".join([
        "#!/bin/bash",
        "set -euo pipefail",
        # A short timeout: during the first bootstrap no peer answers, and each probe waits this long.
        "etcdctl_at() { local endpoint=$1; shift; " + etcdctl_command('"$endpoint"', "3s") + ' "$@"; }',
        "state=existing",
        f'if [ ! -d "{DATA_DIR}/member" ]; then',
        "  healthy=",
        f"  for endpoint in {peers}; do",
        '    if etcdctl_at "$endpoint" endpoint health >/dev/null 2>&1; then healthy=$endpoint; break; fi',
        "  done",
        '  if [ -n "$healthy" ]; then',
        f'    echo "gpucluster: {DATA_DIR} is empty and the cluster answers at $healthy: replacing member {m.name}"',
        '    members=$(etcdctl_at "$healthy" member list)',
        f"    old=$(awk -F', ' '$3 == \"{m.name}\" || $4 == \"{m.peer_url}\" {{print $1}}' <<<\"$members\")",
        '    if [ -n "$old" ]; then',
        '      etcdctl_at "$healthy" member remove "$old"',
        "    fi",
        # Right after a removal etcd may refuse the add ("unhealthy cluster", --strict-reconfig-check):
        # retry, and count an add that went through before its answer was lost.
        "    added=",
        "    for _ in $(seq 1 20); do",
        f'      if etcdctl_at "$healthy" member list | grep -qF ", {m.peer_url},"; then added=1; break; fi',
        f'      if etcdctl_at "$healthy" member add {m.name} --peer-urls={m.peer_url}; then added=1; break; fi',
        "      sleep 3",
        "    done",
        '    if [ -z "$added" ]; then echo "gpucluster: could not add member ' + m.name + '" >&2; exit 1; fi',
        f'  elif [ -e "{STARTED_MARKER}" ]; then',
        f'    echo "gpucluster: {DATA_DIR} is empty, no peer answers and this member ran before:" \\',
        '      "every member lost its data; restore from a snapshot (docs/operations.md)" >&2',
        "    exit 1",
        "  else",
        "    state=new",
        "  fi",
        "fi",
        f'mkdir -p "{STATE_DIR}"',
        f'touch "{STARTED_MARKER}"',
        f"exec {BIN_DIR}/etcd \\\n  {flags} \\\n  --initial-cluster-state=$state",
        "",
    ])


def defrag_script(b: EtcdBootstrap) -> str:
    """Defragment every member one at a time, followers first and the leader last.

    Defragmentation blocks the member it runs on and is not replicated: it is issued per endpoint (etcd v3.6
    op-guide/maintenance.md, "Defragmentation"). Every member's timer fires; only the one that is the leader
    goes on, so one run covers the cluster. It stops unless every member is healthy, defragments each follower
    and waits for it to be healthy again, then hands leadership to a defragmented follower (`move-leader`) and
    defragments itself as a follower: the leader is never blocked (ahrtr/etcd-defrag README.md, "run
    defragmentation on the leader last")."""
    m = b.member
    endpoints = ",".join(p.client_url for p in b.cluster)
    parse = ("import json, sys; [print('leader' if r['Status']['header']['member_id'] == r['Status']['leader'] "
             "else 'follower', r['Endpoint'], format(r['Status']['header']['member_id'], 'x')) "
             "for r in json.load(sys.stdin)]")
    return "\n".join([
        "#!/bin/bash",
        "set -euo pipefail",
        "etcdctl_at() { local endpoint=$1; shift; " + etcdctl_command('"$endpoint"', DEFRAG_TIMEOUT) + ' "$@"; }',
        f'if ! etcdctl_at "{endpoints}" endpoint health >/dev/null; then',
        '  echo "gpucluster: a member is unhealthy; no defragmentation" >&2',
        "  exit 1",
        "fi",
        f'status=$(etcdctl_at "{endpoints}" endpoint status --write-out=json)',
        f'rows=$(python3 -c "{parse}" <<<"$status")',
        "leader=$(awk '$1 == \"leader\" {print $2}' <<<\"$rows\")",
        f'if [ "$leader" != "{m.client_url}" ]; then',
        '  echo "gpucluster: the leader is ${leader:-unknown}; its timer defragments the cluster"',
        "  exit 0",
        "fi",
        "next=",
        "while read -r role endpoint id; do",
        '  [ "$role" = follower ] || continue',
        '  echo "gpucluster: defragmenting follower $endpoint"',
        '  etcdctl_at "$endpoint" defrag </dev/null',
        "  for _ in $(seq 1 60); do",
        '    if etcdctl_at "$endpoint" endpoint health </dev/null >/dev/null 2>&1; then break; fi',
        "    sleep 2",
        "  done",
        '  etcdctl_at "$endpoint" endpoint health </dev/null >/dev/null',
        '  next=${next:-$id}',
        'done <<<"$rows"',
        'if [ -n "$next" ]; then',
        f'  etcdctl_at "{m.client_url}" move-leader "$next"',
        "fi",
        f'echo "gpucluster: defragmenting {m.client_url} (the leader until now) last"',
        f'etcdctl_at "{m.client_url}" defrag',
        "",
    ])


def _unit() -> str:
    # The data disk is prepared (formatted when blank) and mounted at every boot before etcd starts, and
    # etcd never starts on the OS disk's empty /var/lib/etcd.
    return ("[Unit]\nDescription=etcd\nAfter=network-online.target local-fs.target " + DISK_UNIT + "\n"
            f"Wants=network-online.target\nRequires={DISK_UNIT}\n\n"
            # etcd reports ready (sd_notify) only once it has a quorum or has caught up: the first member waits for
            # the next to boot, a replacement may pull a large snapshot. systemd's default 90 s start timeout would
            # kill and restart it meanwhile, so no start timeout.
            f"[Service]\nType=notify\nTimeoutStartSec=0\nExecStartPre=/usr/bin/mountpoint -q {DATA_DIR}\n"
            f"ExecStart={RUN_SCRIPT}\n"
            "Restart=always\nRestartSec=10\nLimitNOFILE=65536\nIOSchedulingClass=realtime\nIOSchedulingPriority=0\n\n"
            "[Install]\nWantedBy=multi-user.target\n")


def _disk_unit() -> str:
    return ("[Unit]\nDescription=gpucluster: etcd data disk (format when blank, mount)\n"
            "After=local-fs.target\nBefore=etcd.service\n\n"
            f"[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart={DISK_SCRIPT}\n")


def disk_script(b: EtcdBootstrap) -> str:
    """At every boot: local NVMe comes back blank after deallocation or a host redeploy, so a blank disk is
    formatted and mounted again (fstab names the device, with `nofail`: a blank or missing disk never
    drops the VM into emergency mode); run_script then rejoins the member."""
    find = (["devices=(/dev/nvme*n1)", "dev=${devices[0]}"] if b.data_on_nvme
            else ["dev=/dev/disk/azure/scsi1/lun0  # Premium SSD v2 data disk at LUN 0"])
    return "\n".join([
        "#!/bin/bash", "set -euo pipefail", *find,
        'if [ ! -b "$dev" ]; then echo "gpucluster: no etcd data disk at $dev" >&2; exit 1; fi',
        'if ! blkid "$dev" >/dev/null; then',
        '  echo "gpucluster: $dev is blank; formatting it"',
        '  mkfs.ext4 -F "$dev"',
        "fi",
        f"mkdir -p {DATA_DIR}",
        f"if ! grep -q ' {DATA_DIR} ' /etc/fstab; then",
        f'  echo "$dev {DATA_DIR} ext4 defaults,noatime,nofail,x-systemd.device-timeout=60s 0 2" >> /etc/fstab',
        "fi",
        f"if ! mountpoint -q {DATA_DIR}; then",
        f"  mount {DATA_DIR}",
        "fi",
        f"chmod 700 {DATA_DIR}",
        "",
    ])


def boot_script() -> str:
    """The image carries etcd, etcdctl and etcdutl (images/etcd/bake.sh): the boot only enables and starts the units,
    without waiting for etcd (it reports ready only with a quorum; etcd.service restarts itself)."""
    return "\n".join([
        "#!/bin/bash", "set -euo pipefail",
        f"if [ ! -x {BIN_DIR}/etcd ]; then",
        '  echo "gpucluster: no etcd on this machine: boot a gpucluster etcd image" >&2',
        "  exit 1",
        "fi",
        "systemctl daemon-reload",
        f"systemctl enable --now --no-block etcd.service etcd-snapshot.timer etcd-defrag.timer {TIMER}",
        *done_lines(ENABLED_MARKER),
        "",
    ])


def boot_unit() -> str:
    """The boot script as a re-runnable unit (components/bootstrap/boot_unit.py)."""
    return make_unit("start this etcd member", BOOT_SCRIPT, ENABLED_MARKER)


def snapshot_script(b: EtcdBootstrap) -> str:
    """`etcdctl snapshot save` over the local client URL with the clientAuth certificate, compressed and uploaded
    with the VM's managed identity as a block blob: Put Block for each 100 MiB block streamed from its file
    (`curl --upload-file`, never the whole snapshot in memory), then Put Block List (Blob service REST API).
    Every file is removed on every path (an EXIT trap; a run that died stays in the work folder until the next
    run clears it). Network calls retry with jittered back-off. Any failure fails the unit (`systemctl --failed`).

    Block ids: base64 of `block-NNNNNN`, all the same length as Put Block requires; base64 of ASCII digits has
    no `+`, `/` or `=`, so the ids go in the query string as they are."""
    blob = f"{b.snapshot_url}/$name"
    auth = '-H "Authorization: Bearer $token" -H \'x-ms-version: ' + BLOB_API_VERSION + "'"
    return "\n".join([
        "#!/bin/bash",
        "set -euo pipefail",
        RETRY_FUNCTION,
        f"work={SNAPSHOT_WORK}",
        'rm -rf "$work"',
        'mkdir -p "$work"',
        'trap \'rm -rf "$work"\' EXIT',
        "trap 'exit 143' TERM INT HUP",
        f'name={b.member.name}-$(date -u +%Y%m%dT%H%M%SZ).db.gz',
        f'{etcdctl_command(f"https://127.0.0.1:{b.member.client_port}", "30m")} snapshot save "$work/snapshot.db"',
        f'gzip -c "$work/snapshot.db" | split -b {SNAPSHOT_BLOCK} -d -a 6 - "$work/block."',
        'rm -f "$work/snapshot.db"',
        "token_answer() {",
        f"  curl -fsS --connect-timeout 10 -H Metadata:true '{IMDS_TOKEN}'",
        "}",
        "token=$(retry 5 token_answer | sed -E 's/.*\"access_token\"[[:space:]]*:[[:space:]]*\"([^\"]+)\".*/\\1/')",
        "put_block() {",
        f'  curl -fsS --connect-timeout 10 --upload-file "$1" {auth} "{blob}?comp=block&blockid=$2"',
        "}",
        "ids=()",
        'for block in "$work"/block.*; do',
        '  id=$(printf "block-%s" "${block##*.}" | base64)',
        '  retry 5 put_block "$block" "$id"',
        '  rm -f "$block"',
        '  ids+=("$id")',
        "done",
        "{",
        "  echo '<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>'",
        '  printf "<Latest>%s</Latest>" "${ids[@]}"',
        "  echo '</BlockList>'",
        '} > "$work/blocklist.xml"',
        "put_block_list() {",
        f'  curl -fsS --connect-timeout 10 --upload-file "$work/blocklist.xml" {auth} "{blob}?comp=blocklist"',
        "}",
        "retry 5 put_block_list",
        'echo "gpucluster: snapshot $name uploaded in ${#ids[@]} blocks"',
        "",
    ])


def render_etcd_cloud_init(b: EtcdBootstrap) -> str:
    files = [
        (f"{PKI_DIR}/ca.crt", "0644", b.ca_cert),
        (f"{PKI_DIR}/server.crt", "0644", b.server_cert),
        (f"{PKI_DIR}/server.key", "0600", b.server_key),
        (f"{PKI_DIR}/peer.crt", "0644", b.peer_cert),
        (f"{PKI_DIR}/peer.key", "0600", b.peer_key),
        (f"{PKI_DIR}/client.crt", "0644", b.client_cert),
        (f"{PKI_DIR}/client.key", "0600", b.client_key),
        (DISK_SCRIPT, "0755", disk_script(b)),
        (f"/etc/systemd/system/{DISK_UNIT}", "0644", _disk_unit()),
        (BOOT_SCRIPT, "0755", boot_script()),
        (f"/etc/systemd/system/{BOOT_UNIT}", "0644", boot_unit()),
        (RUN_SCRIPT, "0755", run_script(b)),
        ("/etc/systemd/system/etcd.service", "0644", _unit()),
        (SNAPSHOT_SCRIPT, "0755", snapshot_script(b)),
        ("/etc/systemd/system/etcd-snapshot.service", "0644",
         "[Unit]\nDescription=etcd snapshot to blob storage\nAfter=etcd.service\n\n[Service]\nType=oneshot\n"
         f"ExecStart={SNAPSHOT_SCRIPT}\n"),
        ("/etc/systemd/system/etcd-snapshot.timer", "0644",
         "[Unit]\nDescription=hourly etcd snapshot\n\n[Timer]\nOnCalendar=hourly\nRandomizedDelaySec=600\n"
         "Persistent=true\n\n[Install]\nWantedBy=timers.target\n"),
        (DEFRAG_SCRIPT, "0755", defrag_script(b)),
        ("/etc/systemd/system/etcd-defrag.service", "0644",
         "[Unit]\nDescription=etcd defragmentation, followers first, leader last\nAfter=etcd.service\n\n"
         f"[Service]\nType=oneshot\nExecStart={DEFRAG_SCRIPT}\n"),
        # No random delay: every member's timer fires together, and only the leader's run acts.
        ("/etc/systemd/system/etcd-defrag.timer", "0644",
         f"[Unit]\nDescription=daily etcd defragmentation\n\n[Timer]\nOnCalendar={DEFRAG_SCHEDULE}\n\n"
         "[Install]\nWantedBy=timers.target\n"),
    ]
    document = {
        "write_files": [{"path": p, "permissions": mode, "content": content} for p, mode, content in files],
        "runcmd": start_unit(BOOT_UNIT),
    }
    document["write_files"] += [{"path": f"{PKI_DIR}/ca.key", "permissions": "0600", "content": b.ca_key},
                                *renewal_files(etcd_renew_script())]
    return dump_cloud_config(document)
