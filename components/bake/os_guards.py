"""What keeps the node OS from undoing the cluster's networking or runtime behind its back.

systemd-networkd deletes routes and routing-policy rules it did not create whenever it starts or reconfigures a
link, unless told not to (networkd.conf(5): `ManageForeignRoutes=` since systemd 246, `ManageForeignRoutingPolicyRules=`
since 249; the base images ship 249 (Ubuntu 22.04) and 255 (24.04)). Cilium's routes and rules are foreign to it: on
8 March 2023 a systemd update installed by unattended-upgrades restarted networkd on tens of thousands of Datadog
nodes at once and removed them (datadoghq.com/blog/engineering/2023-03-08-deep-dive-into-platform-level-impact).
The images turn both off, and take no package updates after the bake (images/lib/bake.sh `disable_package_timers`).
"""

from __future__ import annotations

NETWORKD_DROPIN = "/etc/systemd/networkd.conf.d/60-gpucluster-foreign.conf"
NETWORKD_KEYS = ("ManageForeignRoutes", "ManageForeignRoutingPolicyRules")


def networkd_dropin() -> str:
    """A networkd.conf drop-in (read after /etc/systemd/networkd.conf, in name order; networkd.conf(5))."""
    return "[Network]\n" + "".join(f"{key}=no\n" for key in NETWORKD_KEYS)
