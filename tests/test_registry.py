"""The cluster's registry: every image the plan renders is served by it, each upstream has its cache rule, and the
files that send containerd and the kubelet there follow their consumers' rules (docs/registry.md)."""

from __future__ import annotations

import json
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.catalog.registries import OWN_NAMESPACE, parse_image
from gpucluster.errors import SpecError
from gpucluster.kubernetes.objects.images import pod_spec
from gpucluster.offline.mock_values import SUBSCRIPTION
from gpucluster.planning import agents_image
from gpucluster.planning.azure_names import container_registry_name
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.planning.registry import cluster_upstream_images, plan_registry
from tests.support.stacks import small_spec, stack_spec

IMAGE_KEYS = ("image", "repository", "imageRepository")


def _value_refs(node: Any) -> list[str]:
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, str) and key in IMAGE_KEYS and ("/" in value or key != "image"):
                found.append(value)
            else:
                found += _value_refs(value)
    elif isinstance(node, list):
        for value in node:
            found += _value_refs(value)
    return found


def rendered_images(out: Path) -> list[str]:
    """Every image reference in out/<stack>/: pod specs in manifests/, image values in charts/, kubeadm's
    imageRepository (as the images kubeadm derives from it) in boot/."""
    refs: list[str] = []
    for path in sorted((out / "manifests").glob("*.yaml")):
        spec = pod_spec(yaml.safe_load(path.read_text())) or {}
        refs += [c["image"] for key in ("initContainers", "containers") for c in spec.get(key, [])]
    for path in sorted((out / "charts").glob("*.yaml")):
        refs += _value_refs(yaml.safe_load(path.read_text())["values"])
    for path in sorted((out / "boot").glob("*.yaml")):
        for entry in yaml.safe_load(path.read_text())["write_files"]:
            if entry["path"].endswith("kubeadm.yaml"):
                for document in yaml.safe_load_all(entry["content"]):
                    if "imageRepository" in document:
                        refs.append(f"{document['imageRepository']}/kube-apiserver:{document['kubernetesVersion']}")
    return refs


def not_served(refs: list[str], preview: dict[str, Any]) -> list[str]:
    """References whose host is not the declared registry, or whose namespace no declared cache rule serves."""
    states = [s["newState"] for s in preview["steps"]]
    registry = next(s for s in states if s["type"] == "azure-native:containerregistry:Registry")
    login = f"{registry['inputs']['registryName'].lower()}.azurecr.io"
    prefixes = {s["inputs"]["targetRepository"].removesuffix("/*") for s in states
                if s["type"] == "azure-native:containerregistry:CacheRule"}
    bad = []
    for reference in refs:
        ref = parse_image(reference)
        namespace = ref.path.split("/", 1)[0]
        if ref.host != login or (namespace not in prefixes and namespace != OWN_NAMESPACE) or ref.tag == "latest":
            bad.append(reference)
    return bad


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_image_in_the_plan_comes_from_the_clusters_registry(stack: str, dev_out: Path,
                                                                  prod_cli_plan: tuple[Any, Path]) -> None:
    result, prod_out = prod_cli_plan
    assert result.returncode == 0, result.stderr
    out = dev_out if stack == "dev" else prod_out
    refs = rendered_images(out)
    preview = json.loads((out / "preview.json").read_text())
    assert len(refs) > 20 and not_served(refs, preview) == []
    # The check fails on what the cluster pulled before: an agent on Docker Hub, a chart image on quay.io.
    assert not_served(["python:3.12-slim", "quay.io/cilium/cilium:v1.20.3"], preview) == [
        "python:3.12-slim", "quay.io/cilium/cilium:v1.20.3"]
    # No script travels in a ConfigMap any more: the agents are an image.
    for path in (out / "manifests").glob("*ConfigMap*.yaml"):
        assert not any(key.endswith(".py") for key in yaml.safe_load(path.read_text()).get("data", {}))


def test_cache_rules_are_derived_from_the_image_references(dev_out: Path) -> None:
    spec = stack_spec("dev")
    hosts = {parse_image(r).host for r in cluster_upstream_images(spec)}
    preview = json.loads((dev_out / "preview.json").read_text())
    sources = {s["newState"]["inputs"]["sourceRepository"] for s in preview["steps"]
               if s["newState"]["type"] == "azure-native:containerregistry:CacheRule"}
    assert sources == {f"{h}/*" for h in hosts}
    # mcr.microsoft.com: cloud-provider-azure's cloud-controller-manager (objects/node_lifecycle.py).
    assert hosts == {"registry.k8s.io", "quay.io", "nvcr.io", "public.ecr.aws", "mcr.microsoft.com", "ghcr.io"}
    registry = next(s["newState"]["inputs"] for s in preview["steps"]
                    if s["newState"]["type"] == "azure-native:containerregistry:Registry")
    assert registry["sku"] == {"name": "Premium"} and registry["publicNetworkAccess"] == "Disabled"
    assert registry["dataEndpointEnabled"] is True and registry["zoneRedundancy"] == "Enabled"
    endpoint = next(s["newState"]["inputs"] for s in preview["steps"]
                    if s["newState"]["type"] == "azure-native:network:PrivateEndpoint")
    assert endpoint["privateLinkServiceConnections"][0]["groupIds"] == ["registry"]


def test_docker_hub_needs_a_credential_set_from_key_vault() -> None:
    with pytest.raises(SpecError) as error:
        plan_cluster(small_spec(registry={"extraUpstreams": ["docker.io"]}))
    assert [p.path for p in error.value.problems] == ["cluster.registry.dockerHub"]
    vault = ("/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/secrets/providers/"
             "Microsoft.KeyVault/vaults/team-secrets")
    spec = small_spec(registry={"extraUpstreams": ["docker.io"], "dockerHub": {
        "keyVaultId": vault, "usernameSecret": "docker-hub-user", "passwordSecret": "docker-hub-token"}})
    rule = next(r for r in plan_cluster(spec).registry.cache_rules if r.upstream.host == "docker.io")
    assert (rule.credential_set, rule.source_repository, rule.target_repository) == ("docker-hub", "docker.io/*",
                                                                                     "docker/*")
    with pytest.raises(SpecError) as error:
        plan_registry(small_spec(registry={"extraUpstreams": ["registry.example.com"]}), [])
    assert error.value.problems[0].path == "cluster.registry.extraUpstreams[0]"


@pytest.mark.parametrize("cluster", ["dev", "prod", "a", "x" * 63, "team-7-gpu"])
def test_registry_names_fit_azures_rule(cluster: str) -> None:
    """5-50 alphanumerics (resource-name-rules.md, Microsoft.ContainerRegistry registries)."""
    name = container_registry_name(cluster, "eastus2", SUBSCRIPTION)
    assert 5 <= len(name) <= 50 and name.isalnum()
    assert name != container_registry_name(cluster, "westus3", SUBSCRIPTION)


def _request_path(hosts_toml: str, repository: str, reference: str) -> str:
    """containerd v2.3.4 core/remotes/docker/config/hosts.go `parseHostsFile`: a host URL's path gets `/v2`
    appended unless it ends in `/v2` or `override_path` is set; docker/resolver.go then requests
    `<path>/<repository>/manifests/<reference>`."""
    config = tomllib.loads(hosts_toml)
    (url, host), = config["host"].items()
    path = "/" + url.split("/", 3)[3] if url.count("/") >= 3 else ""
    if path and not path.endswith("/v2") and not host.get("override_path"):
        path += "/v2"
    return f"{path}/{repository}/manifests/{reference}"


def test_containerd_mirror_asks_for_the_cache_rules_repository(dev_out: Path) -> None:
    document = yaml.safe_load((dev_out / "boot" / "pool-t4-t4-z1-00.yaml").read_text())
    files = {f["path"]: f["content"] for f in document["write_files"]}
    quay = files["/etc/containerd/certs.d/quay.io/hosts.toml"]
    assert tomllib.loads(quay)["server"] == "https://quay.io"
    assert _request_path(quay, "cilium/cilium", "v1.20.3") == "/v2/quay/cilium/cilium/manifests/v1.20.3"
    # Without override_path containerd would ask a repository no cache rule serves.
    assert _request_path(quay.replace("override_path = true", ""), "cilium/cilium", "v1") == (
        "/v2/quay/v2/cilium/cilium/manifests/v1")


def test_kubelet_runs_the_acr_credential_provider_for_the_registry_and_its_upstreams(dev_out: Path) -> None:
    """cloud-provider-azure v1.36.5: `--registry-mirror` is `src:dst[,src:dst]` split on `,` then `:` into
    exactly two parts (parseRegistryMirror); the config file is its one positional argument (main.go)."""
    document = yaml.safe_load((dev_out / "boot" / "pool-t4-t4-z1-00.yaml").read_text())
    files = {f["path"]: f["content"] for f in document["write_files"]}
    config = yaml.safe_load(files["/etc/kubernetes/credential-provider/config.yaml"])
    provider, = config["providers"]
    login = provider["matchImages"][0]
    assert login.endswith(".azurecr.io") and set(provider["matchImages"][1:]) == {
        "registry.k8s.io", "quay.io", "nvcr.io", "public.ecr.aws", "mcr.microsoft.com", "ghcr.io"}
    config_file, mirror = provider["args"]
    mappings = [m.split(":") for m in mirror.removeprefix("--registry-mirror=").split(",")]
    assert all(len(m) == 2 and m[1] == login for m in mappings)
    assert json.loads(files[config_file])["useManagedIdentityExtension"] is True
    join = yaml.safe_load(files["/etc/kubernetes/kubeadm-join.yaml"])
    args = {a["name"]: a["value"] for a in join["nodeRegistration"]["kubeletExtraArgs"]}
    assert args["image-credential-provider-config"] == "/etc/kubernetes/credential-provider/config.yaml"


def test_the_agents_image_is_a_valid_dockerfile_and_tagged_by_its_content(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    hadolint = shutil.which("hadolint") or str(Path(__file__).resolve().parents[1] / ".venv" / "bin" / "hadolint")
    ok = subprocess.run([hadolint, str(agents_image.DOCKERFILE)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout
    broken = tmp_path / "Dockerfile"
    broken.write_text(agents_image.DOCKERFILE.read_text().replace("FROM ${BASE_IMAGE}", "FROM python:latest"))
    assert "DL3007" in subprocess.run([hadolint, str(broken)], capture_output=True, text=True).stdout
    assert agents_image.base_image() == "public.ecr.aws/docker/library/python:3.12.13-slim-trixie"
    before = agents_image.content_tag()
    context = tmp_path / "context"
    shutil.copytree(agents_image.CONTEXT, context)
    (context / "health_agent.py").write_text((context / "health_agent.py").read_text() + "\n# changed\n")
    monkeypatch.setattr(agents_image, "CONTEXT", context)
    assert agents_image.content_tag() != before
