"""What Azure and Kubernetes refuse, checked on the stack before any planning, each rule with its source.

Every function raises ValueError with one readable sentence (pydantic reports it at the YAML path) and never
echoes a value that may be secret.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from collections.abc import Iterable, Mapping
from ipaddress import IPv4Network

from gpucluster.vocabulary import (
    AUTOSCALER_ENABLED_TAG,
    AUTOSCALER_NAME_TAG,
    AUTOSCALER_TAG_PREFIX,
    LABEL_ARCH,
    LABEL_BETA_ARCH,
    LABEL_BETA_INSTANCE_TYPE,
    LABEL_BETA_OS,
    LABEL_FAILURE_DOMAIN_REGION,
    LABEL_FAILURE_DOMAIN_ZONE,
    LABEL_HOSTNAME,
    LABEL_INSTANCE_TYPE,
    LABEL_OS,
    LABEL_REGION,
    LABEL_ZONE,
    LIBRARY_TAG_PREFIX,
    NODE_NAMESPACE,
    OWN_PREFIX,
)

# Every pattern here stands for one a Go program (or ARM) applies, and is used with fullmatch: Go's `$` matches
# only at the end of the text ("at end of text (like \z not \Z)", Go regexp/syntax doc), Python's `$` also
# before a final newline, so `re.match("^...$")` would take "gpu\n" for a valid label. Character classes are
# spelled out in ASCII where Go's are ASCII (Go's \d is [0-9]; Python's matches any Unicode digit).

# --- Kubernetes names: k8s.io/apimachinery pkg/util/validation/validation.go (IsQualifiedName, IsValidLabelValue:
# regexp.MustCompile("^" + qualifiedNameFmt + "$"))
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")

# --- kubelet --node-labels: kubernetes/kubernetes staging/src/k8s.io/kubelet/pkg/apis/well_known_labels.go
# (IsKubeletLabel) and cmd/kubelet/app/options/options.go (ValidateKubeletFlags: "unknown 'kubernetes.io' or
# 'k8s.io' labels specified with --node-labels"), v1.34: kubelet refuses to start with any other label there.
KUBELET_LABELS = frozenset({
    LABEL_HOSTNAME, LABEL_ZONE, LABEL_REGION, LABEL_FAILURE_DOMAIN_ZONE, LABEL_FAILURE_DOMAIN_REGION,
    LABEL_BETA_INSTANCE_TYPE, LABEL_INSTANCE_TYPE, LABEL_OS, LABEL_ARCH, LABEL_BETA_OS, LABEL_BETA_ARCH,
})
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", NODE_NAMESPACE)
# Labels and taints under OWN_PREFIX are set by the library (pool, role, InfiniBand domain, preflight).


def qualified_name_problem(key: str) -> str | None:
    """Why `key` is not a label key / taint key Kubernetes accepts, or None."""
    prefix, _, name = key.rpartition("/")
    if "/" in prefix:
        return f"{key!r} has more than one '/'"
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return f"{key!r}: the prefix must be a lowercase DNS subdomain of at most 253 characters"
    if not name or len(name) > 63 or not _QUALIFIED_NAME.fullmatch(name):
        return (f"{key!r}: the name must be 1-63 letters, digits, '-', '_' or '.', starting and ending with a "
                "letter or digit")
    return None


def label_value_problem(value: str) -> str | None:
    if len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
        shown = value if len(value) <= 70 else value[:67] + "..."
        return (f"value {shown!r} must be at most 63 letters, digits, '-', '_' or '.', starting and ending with a "
                "letter or digit (or empty)")
    return None


def _namespace(key: str) -> str:
    return key.split("/", 1)[0] if "/" in key else ""


def _is_kubernetes_namespace(namespace: str) -> bool:
    return any(namespace == n or namespace.endswith("." + n) for n in ("kubernetes.io", "k8s.io"))


def check_node_labels(labels: Mapping[str, str]) -> Mapping[str, str]:
    """Labels a pool's nodes register with through kubelet's --node-labels."""
    for key, value in labels.items():
        problem = qualified_name_problem(key) or label_value_problem(value)
        if problem:
            raise ValueError(f"label {problem}")
        namespace = _namespace(key)
        if key in KUBELET_LABELS:  # k8s.io/kubelet v0.36.4 pkg/apis/well_known_labels.go kubeletLabels
            raise ValueError(f"label {key!r}: kubelet sets it on each node itself (its name, zone, region, size, OS "
                             "and architecture); a pool label would give every node of the pool the same value")
        if _is_kubernetes_namespace(namespace) and not any(
                namespace == n or namespace.endswith("." + n) for n in KUBELET_LABEL_NAMESPACES):
            raise ValueError(
                f"label {key!r}: kubelet refuses 'kubernetes.io' and 'k8s.io' labels other than its own set (such as "
                f"{LABEL_ZONE}) and the {' and '.join(KUBELET_LABEL_NAMESPACES)} namespaces "
                "(node-role.kubernetes.io is for admins, not kubelets); use a prefix of your own")
        if namespace == OWN_PREFIX or namespace.endswith("." + OWN_PREFIX):
            raise ValueError(f"label {key!r}: the {OWN_PREFIX}/ prefix is the library's own (pool, role, InfiniBand "
                             "domain); use a prefix of your own")
    _case_distinct("label", labels)
    return labels


def _case_distinct(what: str, keys: Iterable[str]) -> None:
    """Each label and taint key becomes the name of a scale-set tag the autoscaler reads (node-template tags,
    components/planning/node_template.py), and Azure compares tag names ignoring case (see check_tags)."""
    seen: dict[str, str] = {}
    for key in keys:
        other = seen.setdefault(key.casefold(), key)
        if other != key:
            raise ValueError(f"{what} keys {other!r} and {key!r} differ only by case: Kubernetes keeps both, but each "
                             "becomes a scale-set tag for the autoscaler and Azure tag names ignore case; rename one")


# --- taints: k8s.io/kubernetes pkg/apis/core/validation/validation.go (validateNodeTaints: key a qualified name,
# value a label value, "taints must be unique by key and effect pair")
def check_taint(key: str, value: str) -> None:
    problem = qualified_name_problem(key) or label_value_problem(value)
    if problem:
        raise ValueError(f"taint {problem}")
    if _namespace(key) == OWN_PREFIX:
        raise ValueError(f"taint {key!r}: the {OWN_PREFIX}/ prefix is the library's own (preflight, confidential)")


def check_unique_taints(taints: Iterable[tuple[str, str]]) -> None:
    seen: set[tuple[str, str]] = set()
    taints = list(taints)
    _case_distinct("taint", dict.fromkeys(key for key, _ in taints))
    for key, effect in taints:
        if (key, effect) in seen:
            raise ValueError(f"taint {key!r} with effect {effect} is declared twice; the API server requires taints "
                             "unique by key and effect")
        seen.add((key, effect))


# --- Azure tags: learn.microsoft.com azure-resource-manager/management/tag-resources, "Limitations": at most 50
# tags a resource; names at most 512 characters (128 on storage accounts, which the library tags too), values
# at most 256; names cannot contain < > % & \ ? /. "Tag usage and recommendations": "Tag names are
# case-insensitive for operations. A tag with a tag name, regardless of the casing, is updated or retrieved."
MAX_TAGS = 50
MAX_TAG_NAME = 512
MAX_TAG_NAME_STORAGE = 128
MAX_TAG_VALUE = 256
TAG_NAME_FORBIDDEN = frozenset('<>%&\\?/')


LIBRARY_TAG_PREFIXES = (LIBRARY_TAG_PREFIX, AUTOSCALER_TAG_PREFIX)
"""Tag names the library writes: its own (components/planning/tags.py, node_template.py INFINIBAND_TAG) and the
autoscaler's node templates (node_template.py)."""
AUTOSCALER_DISCOVERY_TAGS = (AUTOSCALER_ENABLED_TAG, AUTOSCALER_NAME_TAG)
"""The autoscaler adopts every scale set carrying these (--node-group-auto-discovery, components/kubernetes/
objects/autoscaler.py): on the API servers' scale set, which carries the user's tags, it would scale them."""


def check_tags(tags: Mapping[str, str], reserved: int) -> Mapping[str, str]:
    """User tags, which the library adds `reserved` tags of its own to on every resource."""
    seen: dict[str, str] = {}
    for name in tags:
        folded = name.casefold()
        if folded.startswith(LIBRARY_TAG_PREFIXES) or folded in AUTOSCALER_DISCOVERY_TAGS:
            raise ValueError(f"tag name {name!r} is the library's own or the cluster autoscaler's (names starting "
                             f"{' or '.join(LIBRARY_TAG_PREFIXES)}, and {', '.join(AUTOSCALER_DISCOVERY_TAGS)}; Azure "
                             "ignores case in tag names); choose another name")
        other = seen.setdefault(folded, name)
        if other != name:
            raise ValueError(f"tag names {other!r} and {name!r} differ only by case, and Azure tag names ignore case "
                             "(one would overwrite the other); keep one")
    if len(tags) + reserved > MAX_TAGS:
        raise ValueError(f"{len(tags)} tags plus the library's {reserved} exceed Azure's {MAX_TAGS} tags a resource; "
                         f"keep at most {MAX_TAGS - reserved}")
    for name, value in tags.items():
        if not name or len(name) > MAX_TAG_NAME_STORAGE:  # these tags go on the storage account too
            raise ValueError(f"tag name {name[:40]!r}... must be 1-{MAX_TAG_NAME_STORAGE} characters")
        bad = sorted(TAG_NAME_FORBIDDEN & set(name))
        if bad:
            raise ValueError(f"tag name {name!r} contains {' '.join(bad)}, which Azure refuses in tag names")
        if len(value) > MAX_TAG_VALUE:
            raise ValueError(f"tag {name!r}: the value is {len(value):,} characters; Azure allows {MAX_TAG_VALUE}")
    return tags


# --- Linux admin user: Microsoft.Compute OSProfile.adminUsername ("Disallowed values", "Max-length (Linux): 64"),
# azure-rest-api-specs specification/compute/.../virtualMachine.json; Azure refuses the VM or scale set. The Linux
# VM FAQ ("What are the username requirements when creating a VM?", MicrosoftDocs/azure-docs
# articles/virtual-machines/linux/faq.md at 072936794779804c74385d33df6af8904fb7abef) lists the same names and
# `video` too.
AZURE_DISALLOWED_USERNAMES = frozenset({
    "administrator", "admin", "user", "user1", "test", "user2", "test1", "user3", "admin1", "1", "123", "a",
    "actuser", "adm", "admin2", "aspnet", "backup", "console", "david", "guest", "john", "owner", "root", "server",
    "sql", "support", "support_388945a0", "sys", "test2", "test3", "user4", "user5", "video",
})


def check_admin_username(name: str) -> str:
    if name.lower() in AZURE_DISALLOWED_USERNAMES:
        raise ValueError(f"{name!r} is one of the names Azure refuses for the admin account; choose another, "
                         "such as azureuser")
    return name


# --- SSH keys: Azure takes OpenSSH public keys ("ssh-rsa" of 2048 bits or more, and "ssh-ed25519"; Microsoft Learn
# virtual-machines/linux/mac-create-ssh-keys and ssh-from-windows). Parsed with `cryptography`, the same wire
# format sshd reads.
_SSH_KEY_TYPES = ("ssh-rsa", "ssh-ed25519")


def check_ssh_public_key(key: str) -> str:
    text = key.strip()
    if "PRIVATE KEY" in text or text.startswith("-----BEGIN"):
        raise ValueError("is a private key, not a public one; give the .pub file's one line, and treat this key "
                         "as exposed (remove it from the file and its history)")
    if any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in text):
        # cloud-init writes each entry as a line of authorized_keys: a line break inside one adds a key (or any line)
        raise ValueError("holds a line break or control character; give one key per entry, each on one line")
    parts = text.split()
    if len(parts) < 2 or parts[0] not in _SSH_KEY_TYPES:
        raise ValueError(f"is not an OpenSSH public key; give one line starting with {' or '.join(_SSH_KEY_TYPES)}, "
                         "as ssh-keygen writes to the .pub file")
    try:
        base64.b64decode(parts[1], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("is not an OpenSSH public key: its key data is not base64") from None
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.hazmat.primitives.serialization import load_ssh_public_key

    try:
        loaded = load_ssh_public_key(f"{parts[0]} {parts[1]}".encode())
    except (ValueError, TypeError):
        raise ValueError(f"is not a valid {parts[0]} public key (its key data does not parse)") from None
    if isinstance(loaded, rsa.RSAPublicKey) and loaded.key_size < 2048:
        raise ValueError("is an RSA key shorter than 2048 bits, which Azure refuses; use ssh-ed25519 or RSA 4096")
    return key


# --- VNet address space: Microsoft Learn virtual-network/virtual-networks-faq, "What address ranges can I use in
# my virtual networks?": multicast, broadcast, loopback, link-local and 168.63.129.16 are refused.
AZURE_RESERVED_RANGES = (
    (IPv4Network("224.0.0.0/4"), "multicast"),
    (IPv4Network("255.255.255.255/32"), "broadcast"),
    (IPv4Network("127.0.0.0/8"), "loopback"),
    (IPv4Network("169.254.0.0/16"), "link-local"),
    (IPv4Network("168.63.129.16/32"), "Azure's internal DNS, DHCP and health-probe address"),
)


def reserved_range_problem(space: IPv4Network) -> str | None:
    for reserved, what in AZURE_RESERVED_RANGES:
        if space.overlaps(reserved):
            return f"{space} overlaps {reserved} ({what}), which Azure refuses in a virtual network"
    return None


# --- Service range: kubeadm puts cluster DNS at the 10th address of the service subnet
# (kubernetes cmd/kubeadm/app/constants/constants.go GetDNSIP: GetIndexedIP(svcSubnet, 10)) and the API server's
# own Service at the first; a range without an 11th address has no DNS IP and `kubeadm init` fails.
DNS_SERVICE_INDEX = 10


THIS_NETWORK = IPv4Network("0.0.0.0/8")
"""'This network': RFC 1122 section 3.2.1.3 (b), `{ 0, <Host-number> }` "Specified host on this network. It MUST NOT
be sent, except as a source address": no Service address, which clients send to, can live there."""


def service_range_problem(service: IPv4Network) -> str | None:
    if service.num_addresses <= DNS_SERVICE_INDEX + 1:
        return (f"{service} has {service.num_addresses} addresses; kubeadm puts cluster DNS at the "
                f"{DNS_SERVICE_INDEX}th, so use /28 or larger")
    if service.overlaps(THIS_NETWORK):
        return (f"{service} overlaps {THIS_NETWORK} ('this network', not a destination address); use a private "
                "range outside the VNet, such as 192.168.0.0/16")
    return reserved_range_problem(service)


# --- Resource ids: ARM's form /subscriptions/{guid}/resourceGroups/{name}/providers/Microsoft.Network/
# virtualNetworks/{name} (resource group names: 1-90 of letters, digits, _ - . ( ), not ending in '.').
_VNET_ID = re.compile(
    r"/subscriptions/[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"/resourceGroups/[-\w.()]{0,89}[-\w()]/providers/Microsoft\.Network/virtualNetworks/[A-Za-z0-9][-\w.]{0,62}[\w]",
    re.IGNORECASE)


def check_vnet_id(value: str) -> str:
    if not _VNET_ID.fullmatch(value):
        raise ValueError("must be a VNet resource id: /subscriptions/<subscription id>/resourceGroups/<group>/"
                         "providers/Microsoft.Network/virtualNetworks/<name> (az network vnet show --query id)")
    return value


_SUBNET_ID = re.compile(_VNET_ID.pattern + r"/subnets/[A-Za-z0-9](?:[-\w.]{0,78}\w)?", re.IGNORECASE)


def check_subnet_id(value: str) -> str:
    if not _SUBNET_ID.fullmatch(value):
        raise ValueError("must be a subnet resource id: /subscriptions/<subscription id>/resourceGroups/<group>/"
                         "providers/Microsoft.Network/virtualNetworks/<vnet>/subnets/<name> "
                         "(az network vnet subnet show --query id)")
    return value


REGISTRY_DNS_ZONE = "privatelink.azurecr.io"
"""The private DNS zone a registry's private endpoint resolves in (azure-docs container-registry-private-link.md)."""
_REGISTRY_ZONE_ID = re.compile(
    r"/subscriptions/[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"/resourceGroups/[-\w.()]{0,89}[-\w()]/providers/Microsoft\.Network/privateDnsZones/"
    + re.escape(REGISTRY_DNS_ZONE), re.IGNORECASE)


def check_registry_zone_id(value: str) -> str:
    if not _REGISTRY_ZONE_ID.fullmatch(value):
        raise ValueError(f"must be the resource id of a {REGISTRY_DNS_ZONE} private DNS zone: /subscriptions/<id>/"
                         f"resourceGroups/<group>/providers/Microsoft.Network/privateDnsZones/{REGISTRY_DNS_ZONE} "
                         f"(az network private-dns zone show -n {REGISTRY_DNS_ZONE} -g <group> --query id)")
    return value


def subnet_vnet(subnet_id: str) -> str:
    """The VNet id a subnet id names (everything before `/subnets/`)."""
    return subnet_id[:subnet_id.lower().rindex("/subnets/")]


def check_unique(values: list[str]) -> list[str]:
    duplicates = sorted({v for v in values if values.count(v) > 1})
    if duplicates:
        raise ValueError(f"lists {', '.join(map(repr, duplicates))} more than once; list each once")
    return values


# --- Kubernetes version: the install script pins `kubelet=<version>-*` and `kubeadm=<version>-*` (pkgs.k8s.io)
# and kubeadm reads `kubernetesVersion: v<version>`, parsed by k8s.io/apimachinery pkg/util/version/version.go
# ParseSemantic: exactly MAJOR.MINOR.PATCH, "illegal zero-prefixed version component" (Semantic Versioning
# 2.0.0, item 2: "MUST NOT contain leading zeroes"). Whether the release exists is the version table's question
# (components/planning/versions.py).
_KUBERNETES_VERSION = re.compile(r"(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})")


def check_kubernetes_version(value: str) -> str:
    if not _KUBERNETES_VERSION.fullmatch(value):
        hint = "; drop the leading v" if value.startswith("v") else ""
        raise ValueError(f"{value!r} is not a Kubernetes release: write MAJOR.MINOR.PATCH in digits with no leading "
                         f"zeros, such as 1.36.4 (kubeadm parses it as a semantic version){hint}")
    return value


# --- Image versions: Microsoft.Compute ImageReference.version (azure-rest-api-specs' ComputeRP spec, the same
# text in pulumi-azure-native 3.29 compute ImageReferenceArgs.version): "The allowed formats are Major.Minor.Build
# or 'latest'. Major, Minor, and Build are decimal numbers."
_IMAGE_VERSION = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+")


def check_image_version(value: str) -> str:
    if value != "latest" and not _IMAGE_VERSION.fullmatch(value):
        raise ValueError(f"{value!r} is not an image version Azure takes: Major.Minor.Build in decimal numbers (as "
                         "`az vm image list --all` lists them, such as 22.04.2024102301), or latest")
    return value


# --- Microsoft Entra object ids: a role assignment's principalId must be a GUID (ARM: "InvalidPrincipalId ...
# Principal ID must be a GUID"), 8-4-4-4-12 hexadecimal digits as `az ad sp show --query id` prints it.
_GUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def check_guid(value: str) -> str:
    if not _GUID.fullmatch(value):
        raise ValueError(f"{value[:60]!r} is not an object id: a GUID of 8-4-4-4-12 hexadecimal digits such as "
                         "0b8e5f3a-1c2d-4e5f-8a9b-0c1d2e3f4a5b (az ad sp show --id <app id> --query id -o tsv)")
    return value
