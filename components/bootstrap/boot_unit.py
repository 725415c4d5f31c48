"""The unit every machine's boot script runs in (nodes, API servers, etcd members), so that a boot that fails runs
again (after a pause, and at every reboot) until it has finished once: cloud-init's `runcmd` runs once per instance
(cloud-init `config/cc_runcmd.py`, frequency PER_INSTANCE), so a boot run from it is never retried.

systemd.service(5): `Type=oneshot` with `Restart=on-failure` (systemd refuses `always` and `on-success` for
oneshot, `systemd-analyze verify` reports it), `RemainAfterExit=yes` so the unit stays active once done;
`ConditionPathExists=!<marker>` skips it at every boot after the one that finished (the script touches the marker
last). The default start rate limit (5 starts in 10 s) never trips with a 60 s pause between runs. Its output is in
`journalctl -u <unit>`.
"""

from __future__ import annotations

MARKER_DIR = "/var/lib/gpucluster"
RESTART_SECONDS = 60


def boot_unit(description: str, script: str, marker: str, after: tuple[str, ...] = ()) -> str:
    """`after`: units the script needs running (containerd for kubeadm's CRI socket), wanted and ordered before."""
    needs = " ".join(("network-online.target", *after))
    return (f"[Unit]\nDescription=gpucluster: {description}\nWants={needs}\nAfter={needs}\n"
            f"ConditionPathExists=!{marker}\n\n"
            f"[Service]\nType=oneshot\nExecStart={script}\nRemainAfterExit=yes\nTimeoutStartSec=infinity\n"
            f"Restart=on-failure\nRestartSec={RESTART_SECONDS}\n\n"
            "[Install]\nWantedBy=multi-user.target\n")


def start_unit(unit: str) -> list[list[str]]:
    """cloud-init `runcmd`: enable the unit and start it without waiting (the boot runs in it, not in cloud-init)."""
    return [["systemctl", "daemon-reload"], ["systemctl", "enable", "--now", "--no-block", unit]]


def done_lines(marker: str) -> list[str]:
    """The boot script's last lines: the marker that stops the unit from running again."""
    return [f"mkdir -p {marker.rsplit('/', 1)[0]}", f"touch {marker}"]
