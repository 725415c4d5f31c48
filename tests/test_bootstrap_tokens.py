"""Bootstrap tokens without a time bomb: the stack declares them with a fixed expiry, an API-server repair
leaves the expiry alone, and a rotation gives new scale-set models a new token while the previous one stays
valid for the overlap."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
import yaml

from gpucluster.bootstrap.apiserver import BOOT_SCRIPT, KUBEADM_CONFIG
from gpucluster.errors import SpecError
from gpucluster.kubernetes.objects.join import (
    SECRET_TYPE,
    cluster_info_kubeconfig,
    join_rbac,
    secret_name,
    token_string_data,
)
from gpucluster.offline.boot_docs import boot_documents
from gpucluster.offline.engine import ProgramRun, Registration, run_program
from gpucluster.planning.bootstrap_tokens import NODE_GROUP, plan_bootstrap_tokens
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.spec import BootstrapTokenSpec, load_stack_file
from tests.support.stacks import ROOT, STACKS, small_cluster, spec_of

DAY = date(2026, 11, 20)
"""A day inside rotation period 692 of 30 days (period 692 starts 2026-11-03, period 693 on 2026-12-03)."""
SECRET = "kubernetes:core/v1:Secret"
RANDOM = ("random:index/randomString:RandomString", "random:index/randomPassword:RandomPassword")


def _dev_run(monkeypatch: pytest.MonkeyPatch, day: date) -> ProgramRun:
    monkeypatch.setenv("GPUCLUSTER_TODAY", day.isoformat())
    stack = load_stack_file(STACKS / "Pulumi.dev.yaml", "dev")
    return run_program(ROOT / "__main__.py", "gpucluster", "dev", stack.config)


def _by_name(run: ProgramRun) -> dict[str, Registration]:
    return {r.name: r for r in run.registrations}


def _digest(reg: Registration, path: str) -> str:
    return dict(reg.secret_digests)[path]


def kubeadm_init_token_writes(boot: dict[str, Any], now: datetime) -> dict[str, str]:
    """What `kubeadm init` as the boot script runs it writes to `bootstrap-token-*` Secrets: token id -> expiration.
    kubernetes `cmd/kubeadm/app/cmd/phases/init/bootstraptoken.go` runs `UpdateOrCreateTokens` for every token of
    the InitConfiguration unless the phase is skipped; `encodeTokenSecretData` writes `now + ttl`
    (`apis/bootstraptoken/v1/utils.go`); an empty list is defaulted to one token (`SetDefaults_BootstrapTokens`,
    `apis/kubeadm/v1beta4/defaults.go`) with the 24 h default TTL (`constants.DefaultTokenDuration`)."""
    files = {f["path"]: f["content"] for f in boot["write_files"]}
    line = next(x for x in files[BOOT_SCRIPT].splitlines() if "kubeadm init" in x)
    skipped = line.split("--skip-phases=", 1)[1].split()[0].split(",") if "--skip-phases=" in line else []
    if "bootstrap-token" in skipped:
        return {}
    init = next(d for d in yaml.safe_load_all(files[KUBEADM_CONFIG]) if d["kind"] == "InitConfiguration")
    writes = {}
    for token in init.get("bootstrapTokens") or [{"token": "random.default0000000", "ttl": "24h"}]:
        hours = int(str(token.get("ttl", "24h")).removesuffix("h"))
        writes[token["token"].split(".")[0]] = (now + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return writes


def test_the_secret_is_the_bootstrap_token_format() -> None:
    """Kubernetes docs, "Authenticating with Bootstrap Tokens" (Bootstrap Token Secret Format): type
    bootstrap.kubernetes.io/token in kube-system, named bootstrap-token-<id>, `expiration` in RFC 3339, the
    usages as "true", extra groups matching `system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]` (k8s.io/cluster-bootstrap
    `token/api/types.go`, BootstrapGroupPattern); kubeadm writes the same keys (`encodeTokenSecretData`)."""
    schedule = plan_bootstrap_tokens(BootstrapTokenSpec(), DAY)
    data = token_string_data("abc123", "0123456789abcdef", schedule.current)
    assert SECRET_TYPE == "bootstrap.kubernetes.io/token" and secret_name("abc123") == "bootstrap-token-abc123"
    assert data["token-id"] == "abc123" and data["token-secret"] == "0123456789abcdef"
    assert datetime.strptime(data["expiration"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC) == schedule.current.expires
    assert data["usage-bootstrap-authentication"] == data["usage-bootstrap-signing"] == "true"
    assert re.fullmatch(r"system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]", data["auth-extra-groups"])
    assert data["auth-extra-groups"] == NODE_GROUP == "system:bootstrappers:kubeadm:default-node-token"


def test_the_schedule_overlaps_and_rotates() -> None:
    schedule = plan_bootstrap_tokens(BootstrapTokenSpec(rotation_days=30, overlap_days=10), DAY)
    assert schedule.current.period == 692 and schedule.previous.period == 691
    assert schedule.current.issued == datetime(2026, 11, 3, tzinfo=UTC)
    assert schedule.rotates == datetime(2026, 12, 3, tzinfo=UTC)
    # Each token is valid through its period and the overlap after it.
    assert schedule.current.expires == schedule.rotates + timedelta(days=10)
    assert schedule.previous.expires == schedule.current.issued + timedelta(days=10) > datetime(2026, 11, 3, tzinfo=UTC)
    assert {schedule.current.slot, schedule.previous.slot} == {"a", "b"}


def test_overlap_longer_than_rotation_and_ttl_hours_are_refused() -> None:
    with pytest.raises(SpecError) as error:
        spec_of(small_cluster(access={"bootstrapToken": {"rotationDays": 10, "overlapDays": 20}}))
    assert "overlapDays (20) must be at most rotationDays (10)" in str(error.value)
    with pytest.raises(SpecError) as error:
        spec_of(small_cluster(access={"bootstrapToken": {"ttlHours": 2160}}))
    assert "ttlHours is gone" in str(error.value) and "rotationDays" in str(error.value)


def test_a_repair_of_an_api_server_leaves_the_expiry_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plan dev, then repair an API server ten days later: its boot document is rendered again and runs kubeadm
    init, which no longer writes any token; the stack's own Secret is unchanged, so the expiry stays put."""
    run = _dev_run(monkeypatch, DAY)
    spec = load_stack_file(STACKS / "Pulumi.dev.yaml", "dev").spec
    plan = plan_cluster(spec, DAY)
    expiry = plan.tokens.current.expiration
    cluster = {plan.tokens.current.slot: expiry, plan.tokens.previous.slot: plan.tokens.previous.expiration}
    repaired_at = datetime(2026, 11, 30, 12, tzinfo=UTC)
    boot = yaml.safe_load(boot_documents(plan_cluster(spec, repaired_at.date()))["apiserver.yaml"])
    cluster |= kubeadm_init_token_writes(boot, repaired_at)
    assert cluster[plan.tokens.current.slot] == expiry == "2027-01-02T00:00:00Z" and len(cluster) == 2
    # The next `pulumi up` after the repair declares the same Secrets and API-server model.
    again = _by_name(_dev_run(monkeypatch, repaired_at.date()))
    for name, reg in _by_name(run).items():
        if reg.type == SECRET or name == "dev-cp-apiserver":
            path = "stringData" if reg.type == SECRET else "virtualMachineProfile.osProfile.customData"
            assert _digest(again[name], path) == _digest(reg, path), name


def test_the_old_boot_moved_the_expiry_at_each_repair() -> None:
    """The model above is not vacuous: kubeadm's phase with a listed token writes now + ttl at every boot."""
    boot = {"write_files": [
        {"path": BOOT_SCRIPT, "content": "kubeadm init --config x --skip-phases=preflight,etcd\n"},
        {"path": KUBEADM_CONFIG, "content": yaml.safe_dump(
            {"kind": "InitConfiguration", "bootstrapTokens": [{"token": "abcdef.0123456789abcdef", "ttl": "2160h"}]})}]}
    first = kubeadm_init_token_writes(boot, datetime(2026, 11, 20, tzinfo=UTC))
    repaired = kubeadm_init_token_writes(boot, datetime(2026, 11, 30, tzinfo=UTC))
    assert first["abcdef"] != repaired["abcdef"]


def test_rotation_gives_new_models_a_new_token_and_keeps_the_previous(monkeypatch: pytest.MonkeyPatch) -> None:
    """Moving from period 692 into 693: the slot of 692 keeps its keepers (pulumi-random keeps its value, Pulumi
    registry Random provider "Resource Keepers") and its Secret, now the previous token, valid until its own
    expiry; the other slot's keepers change (a new token) and every node scale set's model carries it. The API
    servers' and etcd's models do not change, and running instances keep their model (upgrade policy Manual,
    Azure "Modify a Virtual Machine Scale Set": instances get a new model only when upgraded or reimaged)."""
    before, after = _dev_run(monkeypatch, DAY), _dev_run(monkeypatch, date(2026, 12, 5))
    old, new = _by_name(before), _by_name(after)
    kept, rotated = ("a", "b")  # period 692 is even: slot a; 693 is odd: slot b
    for kind in ("id", "secret"):
        assert new[f"dev-bootstrap-token-{kept}-{kind}"].inputs["keepers"] == \
            old[f"dev-bootstrap-token-{kept}-{kind}"].inputs["keepers"] == {"generation": "1", "period": "692"}
        assert old[f"dev-bootstrap-token-{rotated}-{kind}"].inputs["keepers"]["period"] == "691"
        assert new[f"dev-bootstrap-token-{rotated}-{kind}"].inputs["keepers"]["period"] == "693"
    # The previous token's Secret is the same object with the same data: valid until 2026-12-03 + 30 days.
    assert _digest(new["dev-join-a"], "stringData") == _digest(old["dev-join-a"], "stringData")
    assert _digest(new["dev-join-b"], "stringData") != _digest(old["dev-join-b"], "stringData")
    previous = plan_bootstrap_tokens(BootstrapTokenSpec(), date(2026, 12, 5)).previous
    assert previous.period == 692 and previous.expiration == "2027-01-02T00:00:00Z"
    sets = [n for n, r in new.items() if r.type == "azure-native:compute:VirtualMachineScaleSet"]
    custom = "virtualMachineProfile.osProfile.customData"
    for name in sets:
        changed = _digest(new[name], custom) != _digest(old[name], custom)
        assert changed == (name != "dev-cp-apiserver"), name
        assert new[name].inputs["upgradePolicy"]["mode"] == "Manual"
    for name, reg in new.items():
        if reg.type == "azure-native:compute:VirtualMachine":
            assert reg.inputs["osProfile"] == old[name].inputs["osProfile"]


def test_node_pools_wait_for_the_tokens_in_the_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """A node joins only with a token the API server knows: every node scale set depends on both Secrets,
    which wait for the API servers' /readyz through their provider."""
    run = _by_name(_dev_run(monkeypatch, DAY))
    secrets = {run["dev-join-a"].urn, run["dev-join-b"].urn}
    for reg in run.values():
        if reg.type == "azure-native:compute:VirtualMachineScaleSet" and reg.name != "dev-cp-apiserver":
            assert secrets <= set(reg.dependencies), reg.name
    assert run["dev-join-a"].inputs["metadata"]["namespace"] == "kube-system"
    assert run["dev-join-a"].inputs["type"] == SECRET_TYPE


def test_cluster_info_and_rbac_are_what_kubeadm_writes() -> None:
    """kubeadm's bootstrap-token phase also wrote these (skipped with it): cluster-info holds admin.conf's
    cluster under the name "" (`CreateBootstrapConfigMapIfNotExists`, phases/bootstraptoken/clusterinfo), which
    `kubeadm join` requires to be the only cluster; anonymous may get only that ConfigMap; the node group may post
    CSRs and have them auto-approved (phases/bootstraptoken/node/tlsbootstrap.go)."""
    config = yaml.safe_load(cluster_info_kubeconfig("https://api.dev.internal:6443", "PEM"))
    assert config["clusters"] == [{"name": "", "cluster": {"certificate-authority-data": "UEVN",
                                                            "server": "https://api.dev.internal:6443"}}]
    bindings = {o["metadata"]["name"]: (o["roleRef"]["name"], o["subjects"][0]["name"])
                for o in join_rbac() if o["kind"].endswith("Binding")}
    assert bindings == {
        "kubeadm:get-nodes": ("kubeadm:get-nodes", NODE_GROUP),
        "kubeadm:kubelet-bootstrap": ("system:node-bootstrapper", NODE_GROUP),
        "kubeadm:node-autoapprove-bootstrap": ("system:certificates.k8s.io:certificatesigningrequests:nodeclient",
                                               NODE_GROUP),
        "kubeadm:node-autoapprove-certificate-rotation": (
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"),
        "kubeadm:bootstrap-signer-clusterinfo": ("kubeadm:bootstrap-signer-clusterinfo", "system:anonymous"),
    }


def test_a_bad_plan_date_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUCLUSTER_TODAY", "next tuesday")
    with pytest.raises(SpecError) as error:
        plan_cluster(load_stack_file(STACKS / "Pulumi.dev.yaml", "dev").spec)
    assert str(error.value).startswith("GPUCLUSTER_TODAY: must be a date such as 2026-05-01 (got 'next tuesday')")
