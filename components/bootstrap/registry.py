"""What a machine needs to pull every image from the cluster's registry: containerd's per-upstream mirror
files, and the kubelet's image credential provider that trades the machine's identity for a registry token.

containerd (2.x, `docs/hosts.md` at v2.3.4; `core/remotes/docker/config/hosts.go` `parseHostsFile`): for a pull
of `<upstream>/<path>` it reads `/etc/containerd/certs.d/<upstream>/hosts.toml` (the CRI's registry
`config_path`, which containerd 2's default configuration sets to `/etc/containerd/certs.d:/etc/docker/certs.d`),
tries each `[host]` first and then `server`. A host URL's path is the API root: without `override_path`
containerd appends `/v2` to a path that does not end in it, so `https://<acr>/v2/<prefix>` would be asked for
`/v2/<prefix>/v2/<repo>/...`; with `override_path = true` it asks `/v2/<prefix>/<repo>/...`, the repository the
cache rule `<prefix>/*` serves.

The kubelet (`--image-credential-provider-config`, `--image-credential-provider-bin-dir`, kubelet.config.k8s.io/v1
CredentialProviderConfig) runs kubernetes-sigs/cloud-provider-azure's `acr-credential-provider` (v1.36.5,
cmd/acr-credential-provider, pkg/credentialprovider/azure_credentials.go) for images matching `matchImages`: it
reads an azure.json (`useManagedIdentityExtension`, `userAssignedIdentityID`, `tenantId`), gets an AAD token for
the identity from IMDS and exchanges it for an ACR refresh token of the login server. `--registry-mirror
<upstream>:<login server>` makes it answer for an upstream's images with the registry's token, so a reference
that still names an upstream, pulled through the mirror above, is authenticated too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from gpucluster.bootstrap.cloud_config import safe_yaml
from gpucluster.catalog.node_images import ACR_CREDENTIAL_PROVIDER

CERTS_DIR = "/etc/containerd/certs.d"
CREDENTIAL_PROVIDER_CONFIG = "/etc/kubernetes/credential-provider/config.yaml"
CREDENTIAL_PROVIDER_BIN_DIR = ACR_CREDENTIAL_PROVIDER.directory
"""Where every Kubernetes node image installs `acr-credential-provider` (components/catalog/node_images.py): not
under /var/lib/kubelet, which `kubeadm reset` empties."""
CREDENTIAL_PROVIDER = ACR_CREDENTIAL_PROVIDER.name
AZURE_JSON = "/etc/kubernetes/azure.json"
TOKEN_CACHE = "60m"
"""The provider caches ACR tokens for 60 minutes itself (defaultCacheTTL, azure_credentials.go)."""


@dataclass(frozen=True)
class Mirror:
    upstream: str
    """The host an image reference names (docker.io)."""
    endpoint: str
    """The upstream's API host (https://registry-1.docker.io): containerd's `server`, tried after the registry."""
    prefix: str


@dataclass(frozen=True)
class RegistryBoot:
    login_server: str
    mirrors: tuple[Mirror, ...]
    pull_client_id: str
    """Client id of the pull identity (AcrPull on the registry); a marker in the offline plan."""
    tenant_id: str


def hosts_toml(registry: RegistryBoot, mirror: Mirror) -> str:
    return "\n".join([
        f'server = "{mirror.endpoint}"',
        "",
        f'[host."https://{registry.login_server}/v2/{mirror.prefix}"]',
        '  capabilities = ["pull", "resolve"]',
        "  override_path = true",
        "",
    ])


def credential_provider_config(registry: RegistryBoot) -> dict[str, object]:
    mirrors = ",".join(f"{m.upstream}:{registry.login_server}" for m in registry.mirrors)
    return {
        "apiVersion": "kubelet.config.k8s.io/v1",
        "kind": "CredentialProviderConfig",
        "providers": [{
            "name": CREDENTIAL_PROVIDER,
            "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
            "defaultCacheDuration": TOKEN_CACHE,
            "matchImages": [registry.login_server, *(m.upstream for m in registry.mirrors)],
            "args": [AZURE_JSON, *([f"--registry-mirror={mirrors}"] if mirrors else [])],
        }],
    }


def azure_json(registry: RegistryBoot) -> str:
    return json.dumps({"cloud": "AzurePublicCloud", "tenantId": registry.tenant_id,
                       "useManagedIdentityExtension": True, "userAssignedIdentityID": registry.pull_client_id},
                      indent=2, sort_keys=True) + "\n"


def registry_files(registry: RegistryBoot) -> list[dict[str, str]]:
    """cloud-init write_files entries: one hosts.toml per upstream, the provider's config and its azure.json."""
    files = [{"path": f"{CERTS_DIR}/{m.upstream}/hosts.toml", "permissions": "0644",
              "content": hosts_toml(registry, m)} for m in registry.mirrors]
    files.append({"path": CREDENTIAL_PROVIDER_CONFIG, "permissions": "0644",
                  "content": safe_yaml(credential_provider_config(registry))})
    files.append({"path": AZURE_JSON, "permissions": "0600", "content": azure_json(registry)})
    return files


def kubelet_args() -> list[dict[str, str]]:
    """kubeadm v1beta4 `nodeRegistration.kubeletExtraArgs` entries."""
    return [{"name": "image-credential-provider-config", "value": CREDENTIAL_PROVIDER_CONFIG},
            {"name": "image-credential-provider-bin-dir", "value": CREDENTIAL_PROVIDER_BIN_DIR}]
