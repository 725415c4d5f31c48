"""`gpucluster verify` against fake ARM and Kubernetes API servers on 127.0.0.1 (HTTPS, tests/support/verify_fakes.py).

The clients are the real ones: Microsoft's ARM SDKs (azure-mgmt-compute, -resource, -resource-features,
-containerregistry) behind azure-core's bearer-token policy, and the official Kubernetes client reading a generated
kubeconfig. The fake servers serve what a deployed stack would show, built from its plan; each check then gets a
failing fixture (one field of that state changed), and every run's recorded requests hold no write.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.agents import prefix_ipam
from gpucluster.cli import main
from gpucluster.planning.azure_names import resource_group_name
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.spec import load_stack_file
from gpucluster.verify import expected, nccl
from gpucluster.verify.connect import AzureAccess, kube_api_client
from gpucluster.verify.readonly import WriteRefusedError
from tests.support.manifest_validation import validate_object
from tests.support.scale_sets import is_scale_set
from tests.support.stacks import ROOT
from tests.support.verify_fakes import SUBSCRIPTION, FakeApi, kube_routes, kubeconfig, self_signed, serve
from tests.support.verify_world import KUBE_404, STACK, FakeCredential, World, verdicts

CHECKS = ["azure.providers", "azure.features", "azure.sizes", "azure.quota", "azure.subnets", "azure.scale-sets",
          "azure.nics",
          "azure.images", "azure.registry", "cluster.nodes", "cluster.infiniband", "cluster.confidential",
          "cluster.dns", "cluster.cni", "cluster.images", "cluster.bootstrap-token", "cluster.certificates",
          "azure.instance-models", "cluster.rollout"]












def test_a_deployed_stack_passes_every_check_with_reads_only(live: World) -> None:
    code, doc = live.run("--json")
    assert verdicts(doc, "fail") == [] and verdicts(doc, "skip") == []
    assert code == 0
    assert sorted({r["check"] for r in doc["results"]}) == sorted(CHECKS)
    assert live.writes() == []
    # the NIC list is the prefix IPAM controller's own request, once per prefix-mode scale set
    rg = resource_group_name("vfy")
    nic_reads = [p for m, p in live.arm.received if p.endswith(f"/networkInterfaces?api-version={prefix_ipam.ARM_API_VERSION}")]
    assert sorted(nic_reads) == sorted(
        f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachineScaleSets/"
        f"{s.name}/networkInterfaces?api-version={prefix_ipam.ARM_API_VERSION}" for _, s in expected.scale_sets(live.plan))


def test_the_dev_stack_verifies_with_secondary_addresses(live: World) -> None:
    """dev takes single secondary addresses (Cilium's Azure IPAM) and has no InfiniBand: no NIC list to read, no
    prefix IPAM controller, nothing for the InfiniBand check."""
    dev = ROOT / "stacks" / "Pulumi.dev.yaml"
    original = live.stack, live.plan
    live.stack, live.plan = dev, plan_cluster(load_stack_file(dev, "dev", SUBSCRIPTION).spec)
    try:
        live.reset()
        code, doc = live.run("--json")
    finally:
        live.stack, live.plan = original
    assert (code, verdicts(doc, "fail")) == (0, [])
    assert [(r["check"], r["subject"]) for r in verdicts(doc, "skip")] == [("azure.nics", "every pool"),
                                                                           ("cluster.infiniband", "every pool")]
    assert not any("networkInterfaces" in p for _, p in live.arm.received)
    assert live.writes() == []


def test_the_nic_list_is_the_prefix_ipam_controllers_own_request() -> None:
    """The URL verify reads is the one the controller's ARM lister requests (prefix_ipam.py `Arm.list_nics`)."""
    from gpucluster.agents import prefix_ipam
    from gpucluster.verify.check_nics import nic_list_url

    requested: list[str] = []

    class Http:
        def send(self, request: Any) -> Any:
            requested.append(request.full_url)
            return {"value": []}

    arm = prefix_ipam.Arm("client", Http(), prefix_ipam.Settings())  # type: ignore[arg-type]
    arm.tokens.token, arm.tokens.until = "token", float("inf")
    assert list(arm.list_nics(SUBSCRIPTION, "gpucluster-vfy", "h100-z1-00")) == []
    assert requested == [prefix_ipam.ARM + nic_list_url(SUBSCRIPTION, "gpucluster-vfy", "h100-z1-00")]


def _arm(world: World, path_end: str) -> Any:
    return next(v for k, v in world.arm.routes.items() if k.endswith(path_end))


def _kube(world: World, path: str) -> Any:
    return world.kube.routes[path]


def _node(world: World, prefix: str) -> dict[str, Any]:
    return next(n for n in _kube(world, "/api/v1/nodes")["items"] if n["metadata"]["name"].startswith(prefix))


def _unregister_provider(w: World) -> None:
    _arm(w, "/providers/Microsoft.ContainerRegistry")["registrationState"] = "NotRegistered"


def _feature_missing(w: World) -> None:
    del w.arm.routes[next(k for k in w.arm.routes if "/features/" in k)]


def _zone_not_offered(w: World) -> None:
    sku = next(s for s in _arm(w, "/providers/Microsoft.Compute/skus")["value"] if s["name"] == "Standard_ND96isr_H100_v5")
    sku["locationInfo"][0]["zones"] = ["2", "3"]


def _zone_restricted(w: World) -> None:
    sku = next(s for s in _arm(w, "/providers/Microsoft.Compute/skus")["value"] if s["name"] == "Standard_NCC40ads_H100_v5")
    sku["restrictions"] = [{"type": "Zone", "values": ["eastus2"], "reasonCode": "NotAvailableForSubscription",
                            "restrictionInfo": {"locations": ["eastus2"], "zones": ["3"]}}]


def _runner_zone_restricted(w: World) -> None:
    runner = w.plan.deploy_runner
    assert runner is not None
    sku = next(s for s in _arm(w, "/providers/Microsoft.Compute/skus")["value"] if s["name"] == runner.size.name)
    sku["restrictions"] = [{"type": "Zone", "values": ["eastus2"], "reasonCode": "NotAvailableForSubscription",
                            "restrictionInfo": {"locations": ["eastus2"], "zones": [runner.zone]}}]


def _quota_short(w: World) -> None:
    row = next(u for u in _arm(w, "/locations/eastus2/usages")["value"] if u["name"]["value"] == "standardNDSH100v5Family")
    row["limit"] = 100


def _placement_group_changed(w: World) -> None:
    props = _arm(w, "/virtualMachineScaleSets/h100-z1-00")["properties"]
    props["singlePlacementGroup"], props["platformFaultDomainCount"] = False, 1


def _nic_without_blocks(w: World) -> None:
    for nic in _arm(w, "/virtualMachineScaleSets/h100-z1-00/networkInterfaces")["value"]:
        for config in nic["properties"]["ipConfigurations"]:
            config["properties"].pop("privateIPAddressPrefixLength", None)  # single secondary addresses


def _image_version_missing(w: World) -> None:
    del w.arm.routes[next(k for k in w.arm.routes if "/images/gpu/versions/" in k)]


def _image_not_replicated(w: World) -> None:
    """Replicated elsewhere only, the REST shape of azure-rest-api-specs GalleryRP/stable/2024-03-03/examples/
    galleryExamples/GalleryImageVersion_Get_WithReplicationStatus.json."""
    props = _arm(w, "/images/confidential/versions/1.0.0")["properties"]
    props["publishingProfile"]["targetRegions"][0]["name"] = "West US 3"
    props["replicationStatus"]["summary"][0]["region"] = "West US 3"


def _image_replicating(w: World) -> None:
    _arm(w, "/images/cpu/versions/1.0.0")["properties"]["replicationStatus"]["summary"][0].update(
        state="Replicating", progress=40)


def _scale_set_on_another_version(w: World) -> None:
    reference = _arm(w, "/virtualMachineScaleSets/system-z1-00")["properties"]["virtualMachineProfile"][
        "storageProfile"]["imageReference"]
    reference["id"] = reference["id"].replace("/versions/1.0.0", "/versions/0.9.0")


def _subnet_moved(w: World) -> None:
    _arm(w, "/virtualNetworks/vfy/subnets/etcd")["properties"]["addressPrefix"] = "10.80.250.0/26"


def _cache_rule_missing(w: World) -> None:
    rules = _arm(w, "/cacheRules")["value"]
    rules[:] = [r for r in rules if r["name"] != "cache-nvcr"]


def _credentials_unhealthy(w: World) -> None:
    _arm(w, "/credentialSets/docker-hub")["properties"]["authCredentials"][0]["credentialHealth"] = {
        "status": "Unhealthy", "errorCode": "KeyVaultSecretNotFound", "errorMessage": "secret hub-token not found"}


def _node_without_pod_addresses(w: World) -> None:
    name = _node(w, "h100-z1-00")["metadata"]["name"]
    cilium = next(c for c in _kube(w, "/apis/cilium.io/v2/ciliumnodes")["items"] if c["metadata"]["name"] == name)
    cilium["spec"]["ipam"]["pool"] = {}


def _node_not_ready(w: World) -> None:
    _node(w, "system-z2-00")["status"]["conditions"][0]["status"] = "False"


def _no_rdma(w: World) -> None:
    del _node(w, "h100-z1-00")["metadata"]["labels"]["feature.node.kubernetes.io/rdma.available"]


def _not_attested(w: World) -> None:
    node = _node(w, "cc-z3-00")
    del node["metadata"]["labels"]["gpucluster.io/gpu-attestation"]
    node["status"]["nodeInfo"]["kernelVersion"] = "6.8.0-1025-azure"


def _dns_not_ready(w: World) -> None:
    _kube(w, "/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices")["items"][0]["endpoints"][0][
        "conditions"]["ready"] = False


def _cni_not_ready(w: World) -> None:
    _kube(w, "/apis/apps/v1/namespaces/kube-system/daemonsets/cilium")["status"]["numberReady"] -= 1


def _image_does_not_pull(w: World) -> None:
    pod = _kube(w, "/api/v1/namespaces/gpu-operator/pods")["items"][0]
    pod["status"]["containerStatuses"][0]["state"] = {"waiting": {
        "reason": "ImagePullBackOff", "message": "Back-off pulling image: 404 Not Found"}}


def _token_expiring(w: World) -> None:
    w.kube.routes.update({k: v for k, v in kube_routes(w.plan, token_days=3).items() if k.endswith("/secrets")})


FAILURES: list[tuple[str, Callable[[World], None], str, str]] = [
    ("azure.providers", _unregister_provider, "Microsoft.ContainerRegistry", "NotRegistered"),
    ("azure.features", _feature_missing, "Microsoft.Network/FixturePrefixOnNic", "NotFound"),
    ("azure.sizes", _zone_not_offered, "Standard_ND96isr_H100_v5 in eastus2 zone 1", "not offered in zone 1"),
    ("azure.sizes", _zone_restricted, "Standard_NCC40ads_H100_v5 in eastus2 zone 3", "NotAvailableForSubscription"),
    ("azure.sizes", _runner_zone_restricted, "deployment runner", "NotAvailableForSubscription"),
    ("azure.quota", _quota_short, "standardNDSH100v5Family", "limit 100 vCPUs, the plan needs 576"),
    ("azure.scale-sets", _placement_group_changed, "h100-z1-00", "singlePlacementGroup False (planned True)"),
    ("azure.nics", _nic_without_blocks, "h100-z1-00", "instance 0: podblock01 10."),
    ("azure.scale-sets", _scale_set_on_another_version, "system-z1-00", "/images/cpu/versions/0.9.0 (planned "),
    ("azure.images", _image_version_missing, "gpu 1.0.0 (h100-z1-00", "no version 1.0.0 of gpu in gallery vfy.node.images"),
    ("azure.images", _image_not_replicated, "confidential 1.0.0 (cc-z3-00)",
     "not replicated to eastus2 (target regions: West US 3)"),
    ("azure.images", _image_replicating, "cpu 1.0.0", "replication to eastus2 Replicating (40%)"),
    ("azure.subnets", _subnet_moved, "subnet for etcd", "its prefix is 10.80.250.0/26, the plan says"),
    ("azure.registry", _cache_rule_missing, "cache rule cache-nvcr", "missing"),
    ("azure.registry", _credentials_unhealthy, "credential set docker-hub", "secret hub-token not found"),
    ("cluster.nodes", _node_without_pod_addresses, "pool h100", "no pod addresses"),
    ("cluster.nodes", _node_not_ready, "pool system", "not Ready"),
    ("cluster.infiniband", _no_rdma, "pool h100", "no rdma.available"),
    ("cluster.confidential", _not_attested, "pool cc", "gpucluster.io/gpu-attestation=None"),
    ("cluster.dns", _dns_not_ready, "kube-system/kube-dns", "no ready endpoint"),
    ("cluster.cni", _cni_not_ready, "kube-system/cilium", "of 10 agents ready"),
    ("cluster.images", _image_does_not_pull, "images of", "ImagePullBackOff"),
    ("cluster.bootstrap-token", _token_expiring, "token abcdef", "in 2 day(s)"),
]


@pytest.mark.parametrize(("check", "break_it", "subject", "detail"), FAILURES,
                         ids=[f"{c}-{f.__name__.strip('_')}" for c, f, _, _ in FAILURES])
def test_each_check_fails_on_its_fixture_and_only_there(live: World, check: str, break_it: Callable[[World], None],
                                                       subject: str, detail: str) -> None:
    break_it(live)
    code, doc = live.run("--json")
    failed = verdicts(doc, "fail")
    assert code == 1
    assert {r["check"] for r in failed} == {check}, failed
    assert any(subject in r["subject"] and detail in r["detail"] and r["fix"] and r["source"] for r in failed), failed
    assert live.writes() == []


def test_the_serving_certificate_is_read_from_the_handshake(world: World) -> None:
    """An API server whose certificate expires in 5 days fails; the kubeconfig's CA and client certificate (the
    same short-lived certificate here) fail with it."""
    world.reset()
    short = self_signed(days=5)
    with serve(FakeApi(routes=kube_routes(world.plan), not_found=KUBE_404), short, world.folder) as kube:
        folder = world.folder / "short"
        folder.mkdir(exist_ok=True)
        code, doc = world.run("--json", kubeconfig=kubeconfig(folder, kube.url, short, client=short))
        assert kube.received and all(m == "GET" for m, _ in kube.received)
    failed = verdicts(doc, "fail")
    assert code == 1
    assert {r["check"] for r in failed} == {"cluster.certificates"}
    assert {r["subject"].split(" (")[0] for r in failed} == {"API server serving certificate", "kubeconfig CA",
                                                             "kubeconfig client certificate"}
    assert all("expires in 4 day(s)" in r["detail"] for r in failed)


def test_an_answer_of_an_unexpected_shape_fails_its_check_only(live: World) -> None:
    _kube(live, "/apis/apps/v1/namespaces/kube-system/daemonsets/cilium")["status"]["numberReady"] = "most"
    code, doc = live.run("--json")
    assert code == 1
    assert [(r["check"], r["detail"]) for r in verdicts(doc, "fail")] == [
        ("cluster.cni", "the check could not interpret what it read: ValueError: invalid literal for int() with base "
                        "10: 'most'")]


def test_a_prefix_stack_without_a_feature_name_says_what_it_could_not_read(live: World, tmp_path: Path) -> None:
    raw = copy.deepcopy(STACK)
    raw["network"]["prefixOnNicOnboarding"] = "onboarding request 4711, approved 2026-10-01"
    stack = tmp_path / "Pulumi.vfy.yaml"
    stack.write_text(yaml.safe_dump({"config": {"gpucluster:cluster": raw}}))
    live.stack, original = stack, live.stack
    try:
        _, doc = live.run("--json")
        del raw["network"]["prefixOnNicOnboarding"]
        stack.write_text(yaml.safe_dump({"config": {"gpucluster:cluster": raw}}))
        code, unrecorded = live.run("--json")
    finally:
        live.stack = original
    skipped = [r for r in doc["results"] if r["check"] == "azure.features"]
    assert [r["status"] for r in skipped] == ["skip"]
    assert "onboarding request 4711" in skipped[0]["detail"] and "azure.nics" in skipped[0]["detail"]
    assert "virtual-network-private-ip-address-blocks-portal.md" in skipped[0]["source"]
    assert code == 1
    assert [r["status"] for r in unrecorded["results"] if r["check"] == "azure.features"] == ["fail"]


def test_a_feature_given_on_the_command_line_is_read(live: World) -> None:
    code, doc = live.run("--json", "--feature", "Microsoft.Compute/UltraSSDWithVMSS")
    failed = verdicts(doc, "fail")
    assert code == 1
    assert [(r["subject"], r["source"]) for r in failed] == [("Microsoft.Compute/UltraSSDWithVMSS",
                                                               "feature name from --feature")]


def test_a_write_the_sdk_makes_on_its_own_is_refused_before_it_is_sent(live: World) -> None:
    """azure-mgmt-core's ARMAutoResourceProviderRegistrationPolicy answers a 409 MissingSubscriptionRegistration
    with POST .../providers/<ns>/register: the read-only transport refuses it, the check fails, nothing is sent."""
    skus = next(k for k in live.arm.routes if k.endswith("/providers/Microsoft.Compute/skus"))
    live.arm.routes[skus] = (409, {"error": {"code": "MissingSubscriptionRegistration",
                                             "message": "The subscription is not registered to use namespace "
                                                        "'Microsoft.Compute'."}})
    code, doc = live.run("--json")
    failed = verdicts(doc, "fail")
    assert code == 1
    assert [r["check"] for r in failed] == ["azure.sizes"]
    assert "refused a write before it was sent: POST" in failed[0]["detail"]
    assert "/providers/Microsoft.Compute/register" in failed[0]["detail"]
    assert "az provider register --namespace Microsoft.Compute" in failed[0]["fix"]
    assert live.writes() == []


def test_the_clients_refuse_writes_before_sending(live: World) -> None:
    from azure.mgmt.compute import ComputeManagementClient

    access = AzureAccess(FakeCredential(), SUBSCRIPTION, live.arm.url, str(live.ca))
    with pytest.raises(WriteRefusedError, match="DELETE"):
        access.client(ComputeManagementClient).virtual_machine_scale_sets.begin_delete("rg", "h100-z1-00")
    api = kube_api_client(str(live.kubeconfig), None)
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        serialized = api.param_serialize(method, "/api/v1/namespaces/default/configmaps", body={},
                                         auth_settings=["BearerToken"])
        with pytest.raises(WriteRefusedError, match=method):
            api.call_api(*serialized)
    assert live.arm.received == [] and live.kube.received == []


def test_people_read_a_failure_with_its_fix_and_source(live: World) -> None:
    _nic_without_blocks(live)
    code, out = live.run()
    lines = out["text"].splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("FAIL azure.nics"))
    assert code == 1
    assert lines[at + 1].lstrip().startswith("fix: ") and lines[at + 2].lstrip().startswith("source: ")
    assert "prefix_ipam.py" in lines[at + 2]
    assert lines[-1].endswith("1 failed, 0 skipped")


def _bad_input(capsys: pytest.CaptureFixture[str], argv: list[str]) -> list[str]:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err.splitlines()


def test_bad_input_is_one_line_and_exit_2(live: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    stack = str(live.stack)
    assert _bad_input(capsys, ["verify", stack]) == [
        "error: --kubeconfig: no kubeconfig: pass --kubeconfig <file> or set KUBECONFIG (`pulumi stack output "
        "adminKubeconfig --show-secrets > admin.conf`)"]
    garbage = tmp_path / "kubeconfig"
    garbage.write_text("clusters: 3\n")
    [line] = _bad_input(capsys, ["verify", stack, "--kubeconfig", str(garbage)])
    assert line.startswith(f"error: --kubeconfig {garbage}: cannot be used: ")
    [line] = _bad_input(capsys, ["verify", "nosuchstack", "--kubeconfig", str(live.kubeconfig)])
    assert "stack file not found" in line
    assert _bad_input(capsys, ["verify", stack, "--feature", "PrefixOnNic"]) == [
        "error: --feature: 'PrefixOnNic': give it as Microsoft.<Namespace>/<FeatureName>"]
    for name in ("AZURE_SUBSCRIPTION_ID", "AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET",
                 "AZURE_FEDERATED_TOKEN_FILE", "IDENTITY_ENDPOINT", "MSI_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    document = yaml.safe_load(live.stack.read_text())
    del document["config"]["azure-native:subscriptionId"]  # and none in the stack either
    bare = tmp_path / live.stack.name
    bare.write_text(yaml.safe_dump(document))
    assert _bad_input(capsys, ["verify", str(bare), "--kubeconfig", str(live.kubeconfig)]) == [
        "error: --subscription: no subscription: pass --subscription <id> or set AZURE_SUBSCRIPTION_ID "
        "(`az account show --query id -o tsv`)"]


def test_no_azure_credentials_is_one_line_and_exit_2(live: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "AZURE_FEDERATED_TOKEN_FILE",
                 "AZURE_USERNAME", "IDENTITY_ENDPOINT", "MSI_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no Azure CLI login
    monkeypatch.setenv("PATH", "/nonexistent")  # no az, azd or pwsh to ask
    # developer credentials only (azure-identity's AZURE_TOKEN_CREDENTIALS): skips the managed-identity probe of
    # 169.254.169.254, which has no answer here and would only add its timeout
    monkeypatch.setenv("AZURE_TOKEN_CREDENTIALS", "dev")
    assert _bad_input(capsys, ["verify", str(live.stack), "--kubeconfig", str(live.kubeconfig), "--subscription",
                               SUBSCRIPTION]) == [
        "error: Azure credentials: none found (azure-identity DefaultAzureCredential): run `az login`, or set "
        "AZURE_CLIENT_ID and AZURE_TENANT_ID with AZURE_CLIENT_SECRET or AZURE_FEDERATED_TOKEN_FILE for CI"]


def test_the_stacks_own_subscription_is_the_one_verify_reads(live: World, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """No --subscription and no AZURE_SUBSCRIPTION_ID: the stack's azure-native:subscriptionId (which also names its
    registry) is read, so verify goes on to the credentials instead of asking for a subscription."""
    for name in ("AZURE_SUBSCRIPTION_ID", "AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET",
                 "AZURE_FEDERATED_TOKEN_FILE", "AZURE_USERNAME", "IDENTITY_ENDPOINT", "MSI_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("AZURE_TOKEN_CREDENTIALS", "dev")
    document = yaml.safe_load(live.stack.read_text())
    document["config"]["azure-native:subscriptionId"] = SUBSCRIPTION
    stack = tmp_path / live.stack.name
    stack.write_text(yaml.safe_dump(document))
    [line] = _bad_input(capsys, ["verify", str(stack), "--kubeconfig", str(live.kubeconfig)])
    assert line.startswith("error: Azure credentials: none found")


def test_credentials_that_fail_say_why_in_azure_identitys_words(live: World, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """AZURE_CLIENT_ID, TENANT and SECRET set but unusable: verify said "none found ... set AZURE_CLIENT_ID and
    AZURE_TENANT_ID with AZURE_CLIENT_SECRET", exactly what was set. It now names the credential that was tried and
    passes azure-identity's reason through (offline, that its token endpoint cannot be reached; with a network,
    Entra ID's AADSTS error)."""
    for name in ("AZURE_FEDERATED_TOKEN_FILE", "AZURE_USERNAME", "IDENTITY_ENDPOINT", "MSI_ENDPOINT",
                 "AZURE_CLIENT_CERTIFICATE_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("AZURE_TOKEN_CREDENTIALS", "prod")  # environment first; the chain stops at its failure
    monkeypatch.setenv("AZURE_CLIENT_ID", "00000000-0000-0000-0000-00000000000a")
    monkeypatch.setenv("AZURE_TENANT_ID", "00000000-0000-0000-0000-00000000000b")
    monkeypatch.setenv("AZURE_CLIENT_SECRET", "not-the-secret")
    [line] = _bad_input(capsys, ["verify", str(live.stack), "--kubeconfig", str(live.kubeconfig), "--subscription",
                                 SUBSCRIPTION])
    assert line.startswith("error: Azure credentials: EnvironmentCredential failed: Authentication failed: ")
    assert "none found" not in line
    assert line.endswith("(azure-identity DefaultAzureCredential; from AZURE_CLIENT_ID, AZURE_TENANT_ID and "
                         "AZURE_CLIENT_SECRET or AZURE_CLIENT_CERTIFICATE_PATH: check them)")
    assert live.arm.received == [] and live.kube.received == []


def test_the_plan_command_does_not_load_the_cloud_clients() -> None:
    """`make plan` pays nothing for verify: the command line imports neither the Azure SDKs nor the Kubernetes client."""
    loaded = subprocess.run([sys.executable, "-c", "import sys, components.cli; print(sorted({m.split('.')[0] for m in "
                             "sys.modules if m.startswith(('azure', 'kubernetes', 'msal'))}))"],
                            capture_output=True, text=True, check=True, cwd=ROOT)
    assert loaded.stdout.strip() == "[]"


NAMESPACES = {"compute": "Microsoft.Compute", "network": "Microsoft.Network", "privatedns": "Microsoft.Network",
              "storage": "Microsoft.Storage", "managedidentity": "Microsoft.ManagedIdentity",
              "containerregistry": "Microsoft.ContainerRegistry", "keyvault": "Microsoft.KeyVault",
              "virtualmachineimages": "Microsoft.VirtualMachineImages", "monitor": "Microsoft.Monitor",
              "alertsmanagement": "Microsoft.AlertsManagement"}
"""azure-native module -> the ARM namespace of its resource types (Microsoft.Resources and Microsoft.Authorization
are the platform's own: registered in every subscription)."""


def test_every_provider_the_program_declares_is_checked(prod_run: Any, prod_spec: Any) -> None:
    modules = {r.type.split(":")[1] for r in prod_run.registrations if r.type.startswith("azure-native:")}
    assert modules - {"resources", "authorization"} <= set(NAMESPACES), modules
    assert {NAMESPACES[m] for m in modules if m in NAMESPACES} <= set(expected.providers(plan_cluster(prod_spec)))


def test_each_scale_sets_expected_image_is_the_one_the_program_boots(prod_run: Any, prod_spec: Any) -> None:
    """expected.machine_image_id is the imageReference.id the Pulumi program gives each scale set
    (components/azure/scale_set/body.py and api_servers.py `gallery_image`, from the plan's node images)."""
    plan = plan_cluster(prod_spec)
    scale_sets = [r for r in prod_run.registrations if is_scale_set({"type": r.type, "inputs": r.inputs})]
    assert {s.inputs["vmScaleSetName"] for s in scale_sets} == (
        {s.name for _, s in expected.scale_sets(plan)} | {expected.API_SCALE_SET})
    for s in scale_sets:
        reference = s.inputs["virtualMachineProfile"]["storageProfile"]["imageReference"]
        # the subscription the offline engine's client config answers
        assert reference == {"id": expected.machine_image_id(plan, "00000000-0000-0000-0000-000000000000",
                                                             s.inputs["vmScaleSetName"])}


def test_the_nccl_job_is_a_valid_two_node_run_in_one_domain(live: World) -> None:
    pool = next(p for p in live.plan.pools if p.infiniband)
    service, job = nccl.job_objects("gpucluster-nccl-1", "h100-z1-00", pool, live.plan.registry.serve(nccl.IMAGE))
    validate_object(service)
    validate_object(job)
    spec = job["spec"]["template"]["spec"]
    assert (job["spec"]["completions"], job["spec"]["parallelism"], job["spec"]["completionMode"]) == (2, 2, "Indexed")
    assert spec["nodeSelector"] == {"gpucluster.io/infiniband-domain": "h100-z1-00"}
    assert spec["subdomain"] == service["metadata"]["name"] and service["spec"]["clusterIP"] == "None"
    assert "--rdzv-endpoint=gpucluster-nccl-1-0.gpucluster-nccl-1.gpucluster-health.svc:29500" in \
        spec["containers"][0]["command"]
    assert spec["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 8}
    assert live.plan.registry.serves(spec["containers"][0]["image"])
    assert {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"} in \
        spec["tolerations"]


NCCL_OVER_IB = ("h100-z1-00000000:41:41 [0] NCCL INFO NET/IB : Using [0]mlx5_ib0:1/IB [1]mlx5_ib1:1/IB ; OOB eth0\n"
                "h100-z1-00000000:41:41 [0] NCCL INFO Using network IB\n"
                "nccl-allreduce ranks=16 bytes=1073741824 busbw_GBps=361.2 exact=True\n")
NCCL_OVER_SOCKETS = ("h100-z1-00000000:41:41 [0] NCCL INFO NET/IB : No device found.\n"
                     "h100-z1-00000000:41:41 [0] NCCL INFO NET/Socket : Using [0]eth0:10.80.1.5<0>\n"
                     "h100-z1-00000000:41:41 [0] NCCL INFO Using network Socket\n"
                     "nccl-allreduce ranks=16 bytes=1073741824 busbw_GBps=2.1 exact=True\n")
"""The lines a socket fallback logs (NCCL from PyTorch on an H100 without InfiniBand, NCCL_DEBUG=INFO): `NET/IB`
appears, and says no device was found."""
NCCL_IB_SLOW = NCCL_OVER_IB.replace("busbw_GBps=361.2", "busbw_GBps=151.0")


@pytest.mark.parametrize(("log", "status", "detail"), [
    (NCCL_OVER_IB, "pass", "bus bandwidth 361.2 GB/s, floor 280 GB/s for Standard_ND96isr_H100_v5"),
    (NCCL_OVER_SOCKETS, "fail", "NCCL did not use InfiniBand: it says Using network Socket"),
    (NCCL_IB_SLOW, "fail", "bus bandwidth 151.0 GB/s over InfiniBand is below the floor of 280 GB/s"),
], ids=["infiniband", "sockets", "infiniband-below-floor"])
def test_nccl_is_the_only_writer_and_cleans_up(live: World, monkeypatch: pytest.MonkeyPatch, log: str, status: str,
                                               detail: str) -> None:
    monkeypatch.setattr(nccl, "POLL_SECONDS", 0.0)
    jobs, health = "/apis/batch/v1/namespaces/gpucluster-health/jobs", "/api/v1/namespaces/gpucluster-health"
    live.kube.routes.update({
        f"POST {health}/services": (201, {"kind": "Service"}), f"POST {jobs}": (201, {"kind": "Job"}),
        f"{jobs}/*": {"kind": "Job", "status": {"succeeded": 2}},
        f"{health}/pods": {"metadata": {}, "items": [{"metadata": {"name": "gpucluster-nccl-0-abc"}}]},
        f"{health}/pods/gpucluster-nccl-0-abc/log": log,
        f"DELETE {jobs}/*": {"kind": "Status"}, f"DELETE {health}/services/*": {"kind": "Status"},
    })
    code, doc = live.run("--json", "--nccl")
    [result] = [r for r in doc["results"] if r["check"] == "cluster.nccl"]
    assert (code, result["status"]) == ((0, "pass") if status == "pass" else (1, "fail"))
    assert detail in result["detail"]
    writes = [(m, p.split("?")[0].rsplit("/", 1)[0] if m == "DELETE" else p) for m, p in live.writes()]
    assert writes == [("POST", f"{health}/services"), ("POST", jobs), ("DELETE", jobs), ("DELETE", f"{health}/services")]
    assert live.arm.received and all(m == "GET" for m, _ in live.arm.received)


def test_the_nccl_floor_is_the_sourced_line_rate_share() -> None:
    """ND H100 v5: 8 x 400 Gb/s; ND GB300 v6: 4 x 800 Gb/s (the Microsoft Learn size pages): 400 GB/s each, 70 %."""
    for size in ("Standard_ND96isr_H100_v5", "Standard_ND128isr_GB300_v6"):
        floor = nccl.floor_gbps(size)
        assert floor is not None and floor[0] == pytest.approx(280.0) and "MicrosoftDocs" in floor[1]
    assert nccl.floor_gbps("Standard_NC4as_T4_v3") is None


def test_a_server_that_echoes_the_callers_token_does_not_get_it_printed(live: World) -> None:
    """A 403 whose body repeats the request's Authorization header, from ARM and from the API server: the verdicts
    name the refusal, never the token (components/verify/results.py `redacted`)."""
    from tests.support.verify_world import ARM_TOKEN

    skus = next(k for k in live.arm.routes if k.endswith("/providers/Microsoft.Compute/skus"))
    cilium = "/apis/apps/v1/namespaces/kube-system/daemonsets/cilium"
    saved = live.arm.routes[skus], live.kube.routes[cilium]
    live.arm.routes[skus] = (403, {"error": {"code": "AuthorizationFailed",
                                             "message": f"denied for Authorization: Bearer {ARM_TOKEN}"}})
    live.kube.routes[cilium] = (403, {"kind": "Status", "status": "Failure", "reason": "Forbidden", "code": 403,
                                      "message": "forbidden for Authorization: Bearer fixture-token"})
    try:
        code, doc = live.run("--json")
        _, text = live.run()
    finally:
        live.arm.routes[skus], live.kube.routes[cilium] = saved
    failed = {r["check"]: r["detail"] for r in verdicts(doc, "fail")}
    assert code == 1 and {"azure.sizes", "cluster.cni"} <= set(failed)
    for output in (json.dumps(doc), text["text"]):
        assert ARM_TOKEN not in output and "fixture-token" not in output
    assert "Bearer ***" in failed["azure.sizes"] + failed["cluster.cni"]
