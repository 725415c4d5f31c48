"""First boot of an NVLink rack VM (ND GB300 v6 / GB200 v6): what the node script adds before `kubeadm join`, and
the settings the rack image and the GPU operator carry. docs/rack-scale.md ("First boot") has the sources.

- Labels from IMDS: the platform places each VM in an interconnect group and subgroup (its NVLink rack) and reports
  both as GUIDs in the instance metadata's `compute.interconnectGroupId` / `compute.interconnectSubgroupId`, read
  at api-version 2025-11-11 (kubernetes-sigs/dranet v1.4.0 `pkg/cloudprovider/azure/azure.go`, `imdsComputeMetadata`;
  azure-mgmt-compute `InterconnectInstanceView.interconnect_subgroup_id`: "The ID (GUID) of the Interconnect
  subgroup in which the Virtual Machine was placed"). Microsoft's IMDS page was not found to name them, so the
  script reads them defensively: absent, the node joins with the planned labels only and says so; present but not a
  GUID, the boot stops (a value that is not a valid label would make the kubelet refuse every label).
- IMEX: ComputeDomain mode. NVIDIA's DRA driver (kubernetes-sigs/dra-driver-nvidia-gpu v25.12.0,
  `cmd/compute-domain-daemon/main.go`) runs `nvidia-imex` in its compute-domain daemon pods with a nodes config it
  writes per ComputeDomain (`/imexd/nodes.cfg`), so the host's own `nvidia-imex.service` (host-managed mode with a
  static `/etc/nvidia-imex/nodes_config.cfg`) must not run beside it; the image masks it and the boot checks.
- Memlock: RDMA registers pinned memory; containers inherit containerd's RLIMIT_MEMLOCK (the CRI's default spec sets
  none), so containerd runs with `LimitMEMLOCK=infinity` (systemd.exec(5) `LimitMEMLOCK=`).
"""

from __future__ import annotations

from gpucluster.vocabulary import LABEL_INTERCONNECT_GROUP_ID, LABEL_INTERCONNECT_SUBGROUP_ID

IMDS_INTERCONNECT_API_VERSION = "2025-11-11"
"""The api-version DRANET v1.4.0 reads `interconnectGroupId`/`interconnectSubgroupId` at."""
IMDS_COMPUTE = "http://169.254.169.254/metadata/instance/compute"
JOIN_CONFIG = "/etc/kubernetes/kubeadm-join.yaml"
HOST_IMEX_UNIT = "nvidia-imex.service"
CONTAINERD_MEMLOCK_DROP_IN = "/etc/systemd/system/containerd.service.d/20-gpucluster-memlock.conf"
MEMLOCK_DROP_IN = ("[Service]\n# RDMA in pods registers pinned memory: unlimited, inherited by every container.\n"
                   "LimitMEMLOCK=infinity\n")
TOOLKIT_ENV = {"RUNTIME_CONFIG_SOURCE": "file"}
"""The container toolkit's installer reads the runtime config it extends from `command` (`containerd config dump`)
and then `file` by default (NVIDIA/nvidia-container-toolkit v1.20.0, commit 5505e2f9,
`cmd/nvidia-ctk-installer/container/runtime/runtime.go`, flag `config-source`, env RUNTIME_CONFIG_SOURCE(S)). Either
way the drop-in gets the version of the config it was read from (`pkg/config/engine/containerd/containerd.go`
`parseVersion` into the options, `config.go` `AddRuntimeWithOptions` sets `version` from them): 3 from both, since
the image's file says `version = 3` (components/bake/content.py) and containerd v2.2.1 (commit dea7da59) dumps at
its `version.ConfigVersion = 3` (`version/version.go`). So the version is no reason for this setting. What it
changes: the drop-in starts from the source's whole CRI runtime table (`containerd.go` `getBaseDropInConfigTree`);
from the dump that is every default containerd 2.2.1 has and whatever earlier drop-ins set (`cmd/containerd/command/
config.go` `dumpConfig`: `defaultConfig()`, then the file with its imports), pinned into the toolkit's drop-in; from
the file, only what the image sets. Set where the toolkit runs: the GPU operator's `toolkit.env`."""


def rack_boot_lines(join_config: str = JOIN_CONFIG) -> list[str]:
    """Bash for the node boot script (under `set -euo pipefail`, after the providerID step, before the join)."""
    guid = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    group, subgroup = (name.replace(".", "[.]") for name in (LABEL_INTERCONNECT_GROUP_ID, LABEL_INTERCONNECT_SUBGROUP_ID))
    return [
        "# NVLink rack: the host's IMEX service stays off (the ComputeDomain daemon runs IMEX), containerd runs with",
        "# unlimited memlock, and the interconnect group and subgroup the platform placed this VM in become labels.",
        f"if systemctl is-active --quiet {HOST_IMEX_UNIT}; then",
        f'  echo "gpucluster: {HOST_IMEX_UNIT} is running; the ComputeDomain daemon runs IMEX on rack nodes" >&2',
        "  exit 1",
        "fi",
        'if [ "$(systemctl show --property=LimitMEMLOCK --value containerd.service)" != infinity ]; then',
        '  echo "gpucluster: containerd runs with a memlock limit; RDMA in pods needs LimitMEMLOCK=infinity" >&2',
        "  exit 1",
        "fi",
        "interconnect_id() {",
        "  printf '%s' \"$1\" | grep -oE \"\\\"$2\\\"[[:space:]]*:[[:space:]]*\\\"[^\\\"]*\\\"\" | head -n 1 "
        "| sed -E 's/.*\"([^\"]*)\"$/\\1/'",
        "}",
        f'compute=$(retry 5 curl -sSf --max-time 10 -H Metadata:true "{IMDS_COMPUTE}'
        f'?api-version={IMDS_INTERCONNECT_API_VERSION}&format=json")',
        'group_id=$(interconnect_id "$compute" interconnectGroupId || true)',
        'subgroup_id=$(interconnect_id "$compute" interconnectSubgroupId || true)',
        'if [ -z "$group_id" ] || [ -z "$subgroup_id" ]; then',
        '  echo "gpucluster: IMDS reports no interconnectGroupId/interconnectSubgroupId; joining with the planned '
        'interconnect-group and rack labels only" >&2',
        "else",
        '  for id in "$group_id" "$subgroup_id"; do',
        f"    if ! printf '%s' \"$id\" | grep -qxE '{guid}'; then",
        '      echo "gpucluster: IMDS interconnect id $id is not a GUID" >&2',
        "      exit 1",
        "    fi",
        "  done",
        # Idempotent (a reboot before the join runs this again): any earlier interconnect labels go first.
        f"  sed -i -E '/- name: node-labels/{{n;s#,{group}=[^,]*##g;s#,{subgroup}=[^,]*##g;"
        f"s#^( *value: .*)$#\\1,{LABEL_INTERCONNECT_GROUP_ID}='\"$group_id\"',"
        f"{LABEL_INTERCONNECT_SUBGROUP_ID}='\"$subgroup_id\"'#}}' {join_config}",
        '  echo "gpucluster: interconnect group $group_id, subgroup $subgroup_id"',
        "fi",
    ]
