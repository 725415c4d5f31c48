"""Shell and files every Kubernetes machine (API server or node) needs before kubeadm: kernel prerequisites
(baked into the node images), the API endpoint's name, retries, and the kubelet's providerID read from the
instance metadata service.

Each rule names the program that reads it:
- kubeadm join preflight: `/proc/sys/net/ipv4/ip_forward` must be 1 (`addIPv4Checks`,
  kubernetes `cmd/kubeadm/app/preflight/checks_linux.go`), an error, not a warning.
- Kubernetes' container-runtime prerequisites (kubernetes/website
  `content/en/docs/setup/production-environment/container-runtimes.md`): IPv4 forwarding, and for
  runtimes and CNIs that use them the `overlay` and `br_netfilter` modules with bridged traffic visible
  to iptables. The images carry the module and sysctl files (images/lib/bake.sh `install_files`); systemd loads
  and applies them at every boot, and the boot script checks them before kubeadm.
- cloud-provider-azure builds a scale-set VM's providerID from IMDS as
  `azure://` + `/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachineScaleSets/%s/virtualMachines/%s`
  (`VmssMachineIDTemplate`, `pkg/consts/consts.go`; the instance id is what follows the last `_` of
  the VM name, `extractVmssVMName`); cluster-autoscaler's Azure provider and Cilium's Azure IPAM
  (`Spec.ProviderID ... must be set for Azure IPAM`) read that same string. The boot layer sets it in
  the kubelet's configuration so that no cloud-controller-manager is needed for nodes to initialise.
"""

from __future__ import annotations

KERNEL_MODULES = ("overlay", "br_netfilter")
KUBERNETES_SYSCTLS = {
    "net.ipv4.ip_forward": 1,
    "net.bridge.bridge-nf-call-iptables": 1,
    "net.bridge.bridge-nf-call-ip6tables": 1,
}
MODULES_FILE = "/etc/modules-load.d/gpucluster-kubernetes.conf"
SYSCTL_FILE = "/etc/sysctl.d/90-gpucluster.conf"
IMDS_COMPUTE = "http://169.254.169.254/metadata/instance/compute"
IMDS_API_VERSION = "2021-02-01"
PROVIDER_ID_PATCH = "/etc/kubernetes/patches/kubeletconfiguration1+strategic.yaml"
"""kubeadm applies patches per target in alphanumeric order of the suffix ("target[suffix][+patchtype].extension")."""
PROVIDER_ID_TEMPLATE = ("azure:///subscriptions/{subscription}/resourceGroups/{resource_group}/providers/"
                        "Microsoft.Compute/virtualMachineScaleSets/{scale_set}/virtualMachines/{instance}")

RETRY_FUNCTION = "\n".join([
    "# retry <attempts> <command...>: exponential back-off with full jitter (a random wait of up to 2^n * 5",
    "# seconds, at most 5 minutes), so machines that fail together do not retry together.",
    "retry() {",
    "  local attempts=$1 n=1 cap",
    "  shift",
    '  until "$@"; do',
    '    if [ "$n" -ge "$attempts" ]; then',
    '      echo "gpucluster: giving up after $n attempts: $*" >&2',
    "      return 1",
    "    fi",
    "    cap=$(((1 << n) * 5))",
    '    if [ "$cap" -gt 300 ]; then cap=300; fi',
    '    echo "gpucluster: attempt $n failed: $*; retrying" >&2',
    "    sleep $((RANDOM % cap + 1))",
    "    n=$((n + 1))",
    "  done",
    "}",
])


def sysctl_text(extra: dict[str, int] | None = None) -> str:
    values = {**KUBERNETES_SYSCTLS, **(extra or {})}
    return "".join(f"{k} = {v}\n" for k, v in values.items())


def modules_text() -> str:
    return "".join(f"{m}\n" for m in KERNEL_MODULES)


def kernel_checks() -> list[str]:
    """The image loads the modules and applies the sysctls at every boot (systemd-modules-load, systemd-sysctl);
    the boot script only checks them, so a machine booted from anything else stops with a clear line."""
    return [*(f'if [ ! -d /sys/module/{m} ]; then echo "gpucluster: module {m} is not loaded: boot a gpucluster '
              'node image" >&2; exit 1; fi' for m in KERNEL_MODULES),
            'if [ "$(cat /proc/sys/net/ipv4/ip_forward)" != 1 ]; then',
            '  echo "gpucluster: net.ipv4.ip_forward is not 1; kubeadm preflight would refuse this machine" >&2',
            "  exit 1",
            "fi"]


def boot_jitter(seconds: int) -> str:
    """A random wait before a machine's first network fetch, so a scale-out does not reach every service at once."""
    return f"sleep $((RANDOM % {max(1, seconds)}))"


def hosts_entry(address: str, name: str) -> list[str]:
    """Resolve the API endpoint's name locally (Cluster API Azure's private clusters do the same)."""
    return [f"sed -i '/[[:space:]]{name.replace('.', '[.]')}$/d' /etc/hosts",
            f"echo '{address} {name}' >> /etc/hosts"]


def provider_id(subscription: str, resource_group: str, vm_name: str) -> str:
    """The providerID cloud-provider-azure would set for a Uniform scale-set VM named `<scale set>_<instance id>`."""
    scale_set, _, instance = vm_name.rpartition("_")
    if not scale_set or not instance.isdigit():
        raise ValueError(f"{vm_name!r} is not a scale-set VM name (<scale set>_<instance id>)")
    return PROVIDER_ID_TEMPLATE.format(subscription=subscription.lower(), resource_group=resource_group.lower(),
                                       scale_set=scale_set, instance=instance)


def provider_id_script() -> list[str]:
    """Read IMDS (retried: the metadata service can be slow right after boot) and write the kubelet patch."""
    url = f"{IMDS_COMPUTE}/$1?api-version={IMDS_API_VERSION}&format=text"
    return [
        "imds() {",
        f'  curl -fsS --retry 10 --retry-delay 3 --retry-connrefused -H Metadata:true "{url}"',
        "}",
        'subscription=$(imds subscriptionId | tr "[:upper:]" "[:lower:]")',
        'resource_group=$(imds resourceGroupName | tr "[:upper:]" "[:lower:]")',
        "vm_name=$(imds name)",
        'scale_set=${vm_name%_*}',
        'instance=${vm_name##*_}',
        'case "$instance" in',
        "  ''|*[!0-9]*) echo \"gpucluster: $vm_name is not a scale-set VM name\" >&2; exit 1 ;;",
        "esac",
        "mkdir -p /etc/kubernetes/patches",
        "printf 'apiVersion: kubelet.config.k8s.io/v1beta1\\nkind: KubeletConfiguration\\nproviderID: %s\\n' "
        '"azure:///subscriptions/$subscription/resourceGroups/$resource_group/providers/'
        'Microsoft.Compute/virtualMachineScaleSets/$scale_set/virtualMachines/$instance"'
        f" > {PROVIDER_ID_PATCH}",
    ]
