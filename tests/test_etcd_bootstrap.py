"""etcd member bootstrap: static cluster, TLS on both ports, quota, fast disk and the snapshot timer."""

from __future__ import annotations

import yaml

from gpucluster.bootstrap.etcd import EtcdBootstrap, EtcdMember, etcd_flags, render_etcd_cloud_init

PEERS = (EtcdMember("etcd-0", "10.0.0.68"), EtcdMember("etcd-1", "10.0.0.69"), EtcdMember("etcd-2", "10.0.0.70"))


def _bootstrap(nvme: bool = True) -> EtcdBootstrap:
    return EtcdBootstrap(PEERS[1], PEERS, "prod-etcd", 8 * 2**30, nvme, "CA", "SC", "SK", "PC", "PK",
                         "https://acct.blob.core.windows.net/etcd-snapshots")


def test_flags() -> None:
    flags = etcd_flags(_bootstrap())
    assert "--initial-cluster=etcd-0=https://10.0.0.68:2380,etcd-1=https://10.0.0.69:2380,etcd-2=https://10.0.0.70:2380" in flags
    assert "--advertise-client-urls=https://10.0.0.69:2379" in flags
    assert "--client-cert-auth=true" in flags and "--peer-client-cert-auth=true" in flags
    assert f"--quota-backend-bytes={8 * 2**30}" in flags
    assert "--auto-compaction-mode=periodic" in flags


def test_cloud_config_carries_keys_private_and_timer() -> None:
    text = render_etcd_cloud_init(_bootstrap())
    assert text.startswith("#cloud-config\n")
    files = {f["path"]: f for f in yaml.safe_load(text)["write_files"]}
    assert files["/etc/etcd/pki/server.key"]["permissions"] == "0600"
    assert files["/etc/etcd/pki/peer.key"]["content"] == "PK"
    assert "OnCalendar=hourly" in files["/etc/systemd/system/etcd-snapshot.timer"]["content"]
    assert "https://acct.blob.core.windows.net/etcd-snapshots" in files["/usr/local/sbin/gpucluster-etcd-snapshot"]["content"]
    assert "nvme" in files["/usr/local/sbin/gpucluster-etcd-disk"]["content"]
    ssd = {f["path"]: f for f in yaml.safe_load(render_etcd_cloud_init(_bootstrap(nvme=False)))["write_files"]}
    assert "lun0" in ssd["/usr/local/sbin/gpucluster-etcd-disk"]["content"]


def test_a_wiped_nvme_disk_is_recovered_at_boot_not_an_emergency() -> None:
    """systemd-fstab-generator: an fstab entry without `nofail` whose device has no filesystem fails
    local-fs.target and the boot stops in emergency mode (systemd.mount(5), "nofail"). Local NVMe is blank
    after deallocation: the disk unit formats it again at every boot before etcd, and etcd refuses to start
    unless its data dir is a mount (never on the OS disk)."""
    files = {f["path"]: f["content"] for f in yaml.safe_load(render_etcd_cloud_init(_bootstrap()))["write_files"]}
    disk = files["/usr/local/sbin/gpucluster-etcd-disk"]
    fstab = next(line for line in disk.splitlines() if ">> /etc/fstab" in line)
    assert "nofail" in fstab.split()[4].split(",") and "x-systemd.device-timeout=60s" in fstab
    assert disk.index("blkid") < disk.index("mkfs.ext4") < disk.index("mount /var/lib/etcd")
    unit = files["/etc/systemd/system/etcd.service"]
    assert "Requires=gpucluster-etcd-disk.service" in unit and "ExecStartPre=/usr/bin/mountpoint -q /var/lib/etcd" in unit
    disk_unit = files["/etc/systemd/system/gpucluster-etcd-disk.service"]
    assert "Before=etcd.service" in disk_unit and "Type=oneshot" in disk_unit
    # The decision between new, existing and refusing is the run script's (e2e/tests/test_real_etcd.py runs it).
    run = files["/usr/local/sbin/gpucluster-etcd-run"]
    assert "member remove" in run and "member add etcd-1 --peer-urls=https://10.0.0.69:2380" in run


def test_etcd_unit_waits_for_its_peers_without_a_start_timeout() -> None:
    """etcd with `Type=notify` signals READY only when it can serve, i.e. once a quorum exists (etcd
    server/etcdmain/etcd.go, `notifySystemd` after the server is ready); members are created one after another,
    so the first waits minutes for the second. systemd's default start timeout (DefaultTimeoutStartSec=90s,
    systemd-system.conf(5)) would kill it meanwhile; `TimeoutStartSec=0` disables it (systemd.service(5))."""
    files = {f["path"]: f["content"] for f in yaml.safe_load(render_etcd_cloud_init(_bootstrap()))["write_files"]}
    unit = files["/etc/systemd/system/etcd.service"].splitlines()
    assert "Type=notify" in unit and "TimeoutStartSec=0" in unit


def test_defragmentation_timer_and_metrics_listener() -> None:
    """Defragmentation runs from a daily timer on every member (only the leader's run acts: e2e/tests/test_real_etcd.py
    runs it); the metrics listener serves on the member's own address for a scraper (etcd --listen-metrics-urls)."""
    files = {f["path"]: f["content"] for f in yaml.safe_load(render_etcd_cloud_init(_bootstrap()))["write_files"]}
    timer = files["/etc/systemd/system/etcd-defrag.timer"]
    assert "OnCalendar=*-*-* 04:17:00" in timer and "RandomizedDelaySec" not in timer
    assert "ExecStart=/usr/local/sbin/gpucluster-etcd-defrag" in files["/etc/systemd/system/etcd-defrag.service"]
    assert "etcd-defrag.timer" in files["/usr/local/sbin/gpucluster-etcd-boot"]
    assert "--listen-metrics-urls=http://127.0.0.1:2381,http://10.0.0.69:2381" in etcd_flags(_bootstrap())
