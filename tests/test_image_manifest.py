"""Every file a boot document or an image's unit names is in that machine's image: the bundle's files, what the bake
installs from releases, what its packages install (components/bake/manifest.py). The kubelet's credential provider
is the case that broke: every kubelet was started with `--image-credential-provider-bin-dir` naming a binary no image
installed, under /var/lib/kubelet, which `kubeadm reset` empties.

The bake's install of the provider runs unchanged from the bundle (images/lib/bake.sh), with a stand-in `curl` that
serves a release's JSON (GitHub's `assets[].digest`) and an asset."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from gpucluster.bake.bundle import bake_bundle, pins
from gpucluster.bake.manifest import image_manifest, missing_files, named_files
from gpucluster.bootstrap import registry
from gpucluster.catalog.node_images import ACR_CREDENTIAL_PROVIDER, NODE_IMAGES
from gpucluster.offline.boot_docs import boot_documents, document_images, missing_image_files
from gpucluster.planning.cluster_plan import ClusterPlan, plan_cluster
from tests.support.stacks import stack_spec

PAYLOAD = b"ELF provider"
CURL = '''#!{python}
"""curl -o FILE URL: the release JSON from api.github.com, the asset otherwise."""
import hashlib, json, os, sys
args = sys.argv[1:]
out, url = args[args.index("-o") + 1], args[-1]
payload = os.environ["ASSET_BYTES"].encode()
with open(out, "wb") as f:
    if "api.github.com" in url:
        digest = os.environ.get("DIGEST") or hashlib.sha256(payload).hexdigest()
        f.write(json.dumps({{"assets": [{{"name": os.environ["ASSET"], "digest": "sha256:" + digest}}]}}).encode())
    else:
        f.write(payload)
with open(os.environ["CURL_LOG"], "a") as log:
    log.write(url + "\\n")
'''


@pytest.fixture(scope="module", params=["prod", "gb300"])
def plan(request: pytest.FixtureRequest) -> ClusterPlan:
    return plan_cluster(stack_spec(request.param))


def test_every_boot_document_names_only_files_its_image_holds(plan: ClusterPlan) -> None:
    documents = boot_documents(plan)
    assert missing_image_files(plan, documents) == []
    images = document_images(plan)
    node = next(n for n in documents if n.startswith("pool-"))
    assert f"{ACR_CREDENTIAL_PROVIDER.path}" in named_files(yaml.safe_load(documents[node]))
    assert ACR_CREDENTIAL_PROVIDER.path in image_manifest(images[node])


def test_the_provider_under_var_lib_kubelet_is_missing(plan: ClusterPlan, monkeypatch: pytest.MonkeyPatch) -> None:
    """As rendered before: the bin dir under /var/lib/kubelet, where no image put the binary."""
    monkeypatch.setattr(registry, "CREDENTIAL_PROVIDER_BIN_DIR", "/var/lib/kubelet/credential-provider")
    problems = missing_image_files(plan, boot_documents(plan))
    assert problems, "every kubelet's document names the provider"
    assert {p.path for p in problems} == {f"boot/{n}" for n in document_images(plan)
                                          if not n.startswith("etcd")}
    assert all("names /var/lib/kubelet/credential-provider/acr-credential-provider, which the" in p.message
               for p in problems)


def test_an_image_that_does_not_install_the_provider_fails() -> None:
    document = boot_documents(plan_cluster(stack_spec("dev")))
    name = next(n for n in document if n.startswith("pool-"))
    assert missing_files(document[name], "cpu") == []
    assert missing_files(document[name], "etcd") == [ACR_CREDENTIAL_PROVIDER.path]  # an image without a kubelet


def test_a_unit_running_a_program_no_package_installs() -> None:
    text = ("#cloud-config\nwrite_files:\n- path: /etc/systemd/system/x.service\n  content: |\n    [Service]\n"
            "    ExecStartPre=-/usr/bin/mountpoint -q /var/lib/x\n    ExecStart=/usr/local/bin/x-daemon --flag\n")
    assert missing_files(text, "cpu") == ["/usr/local/bin/x-daemon"]


def test_every_kubernetes_image_pins_its_architectures_asset() -> None:
    for definition, image in NODE_IMAGES.items():
        env = pins(definition, "1.0.0", "1.36.4")
        assert env["ACR_PROVIDER_TAG"] == "v1.36.5"
        assert env["ACR_PROVIDER_ASSET"] == {"x64": "azure-acr-credential-provider-linux-amd64",
                                             "Arm64": "azure-acr-credential-provider-linux-arm64"}[image.architecture]
        assert env["ACR_PROVIDER_PATH"].startswith("/usr/local/libexec/") and "/var/lib/kubelet" not in env[
            "ACR_PROVIDER_PATH"]


def _bake(tmp_path: Path, definition: str, digest: str = "") -> subprocess.CompletedProcess[str]:
    bundle = tmp_path / "bundle"
    with tarfile.open(fileobj=io.BytesIO(bake_bundle(definition, "1.0.0", "1.36.4").archive())) as tar:
        tar.extractall(bundle)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "curl").write_text(CURL.format(python=sys.executable))
    (bin_dir / "curl").chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "ROOT": str(tmp_path / "root"), "BUNDLE": str(bundle),
           "ASSET_BYTES": PAYLOAD.decode(), "ASSET": pins(definition, "1.0.0", "1.36.4")["ACR_PROVIDER_ASSET"],
           "DIGEST": digest, "CURL_LOG": str(tmp_path / "curl.log")}
    return subprocess.run(["bash", "-c", f'set -euo pipefail; . "{bundle}/lib/bake.sh"; install_acr_credential_provider; '
                                         'echo "recorded $ACR_PROVIDER_SHA256"'],
                          env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("definition", ["rack", "cpu"])
def test_the_bake_installs_the_provider_checked_against_the_release_digest(tmp_path: Path, definition: str) -> None:
    result = _bake(tmp_path, definition)
    assert result.returncode == 0, result.stderr
    installed = tmp_path / "root" / ACR_CREDENTIAL_PROVIDER.path.lstrip("/")
    assert installed.read_bytes() == PAYLOAD and os.access(installed, os.X_OK)
    assert f"recorded {hashlib.sha256(PAYLOAD).hexdigest()}" in result.stdout
    arch = "arm64" if definition == "rack" else "amd64"
    assert (tmp_path / "curl.log").read_text().splitlines() == [
        "https://api.github.com/repos/kubernetes-sigs/cloud-provider-azure/releases/tags/v1.36.5",
        f"https://github.com/kubernetes-sigs/cloud-provider-azure/releases/download/v1.36.5/"
        f"azure-acr-credential-provider-linux-{arch}"]


def test_a_download_that_does_not_match_the_digest_stops_the_bake(tmp_path: Path) -> None:
    result = _bake(tmp_path, "cpu", digest="0" * 64)
    assert result.returncode == 1
    assert f"does not match its release digest {'0' * 64}" in result.stderr
    assert not (tmp_path / "root" / ACR_CREDENTIAL_PROVIDER.path.lstrip("/")).exists()


def test_the_release_json_digest_is_what_github_serves(tmp_path: Path) -> None:
    """GitHub's release JSON names each asset's digest as `sha256:<hex>` (changelog 2025-06-03); an asset without one
    stops the bake rather than installing unchecked."""
    release = tmp_path / "release.json"
    release.write_text(json.dumps({"assets": [{"name": "a", "digest": None}]}))
    bundle = tmp_path / "bundle"
    with tarfile.open(fileobj=io.BytesIO(bake_bundle("cpu", "1.0.0", "1.36.4").archive())) as tar:
        tar.extractall(bundle)
    result = subprocess.run(["bash", "-c", f'. "{bundle}/lib/bake.sh"; release_digest "{release}" a'],
                            env={**os.environ, "BUNDLE": str(bundle)}, capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout == "\n"
