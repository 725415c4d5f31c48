"""A stack deployed on the fake ARM and API server as `gpucluster verify` reads it (the `world` fixture, reset
per test by `live`), and the verdicts of a `--json` run."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from azure.core.credentials import AccessToken, AccessTokenInfo
from rich.console import Console

from gpucluster.cli import parser
from gpucluster.planning.cluster_plan import ClusterPlan, plan_cluster
from gpucluster.spec import load_stack_file
from gpucluster.verify.command import verify_command
from gpucluster.verify.connect import AzureAccess
from tests.support.verify_fakes import SUBSCRIPTION, FakeApi, Tls, arm_routes, kube_routes, kubeconfig, self_signed, serve

STACK = {
    "name": "vfy", "location": "eastus2", "zones": ["1", "2", "3"], "kubernetesVersion": "1.36.4",
    "network": {"addressSpace": ["10.80.0.0/16"],
                # the shape verify reads a feature name in; a fixture name, served by the fake ARM
                "prefixOnNicOnboarding": "Microsoft.Network/FixturePrefixOnNic"},
    "registry": {"extraUpstreams": ["docker.io"], "dockerHub": {
        "keyVaultId": f"/subscriptions/{SUBSCRIPTION}/resourceGroups/shared/providers/Microsoft.KeyVault/vaults/hubkeys",
        "usernameSecret": "hub-user", "passwordSecret": "hub-token"}},
    "pools": [
        {"name": "system", "kind": "system", "vmSize": "Standard_D4s_v5", "count": 2, "minCount": 2,
         "podsPerNode": 30, "podAddresses": "prefixes"},
        # 6: the fewest that give every zone a domain of 2, as the zone-share rule and a two-node NCCL run want
        {"name": "h100", "kind": "gpu", "vmSize": "Standard_ND96isr_H100_v5", "count": 6, "podsPerNode": 16,
         "podAddresses": "prefixes", "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
        {"name": "cc", "kind": "confidential", "vmSize": "Standard_NCC40ads_H100_v5", "count": 1, "zones": ["3"],
         "podsPerNode": 16, "podAddresses": "prefixes"},
    ],
    "controlPlane": {"apiServers": {"count": 1}, "etcd": {"members": 3}, "eventsEtcd": None},
    "teams": [{"name": "research", "quota": {"gpus": 16}}],
    "metrics": {"alerts": {"armRoles": ["Owner"]}},
}


ARM_404 = {"error": {"code": "ResourceNotFound", "message": "The resource was not found."}}


KUBE_404 = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}


ARM_TOKEN = "fixture-arm-token-4f1c9e"
"""The bearer token FakeCredential hands out (the fake ARM does not check it; a test has a server echo it)."""


class FakeCredential:
    """A TokenCredential that hands out a token without Azure AD (the fake ARM does not read it)."""

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken(ARM_TOKEN, int(time.time()) + 3600)

    def get_token_info(self, *scopes: str, options: Any = None) -> AccessTokenInfo:
        return AccessTokenInfo(ARM_TOKEN, int(time.time()) + 3600)


@dataclass
class World:
    stack: Path
    plan: ClusterPlan
    arm: FakeApi
    kube: FakeApi
    kubeconfig: Path
    ca: Path
    tls: Tls
    folder: Path

    def reset(self) -> None:
        self.arm.routes, self.kube.routes = arm_routes(self.plan), kube_routes(self.plan)
        self.arm.received.clear()
        self.kube.received.clear()

    def run(self, *extra: str, kubeconfig: Path | None = None) -> tuple[int, dict[str, Any]]:
        args = parser().parse_args(["verify", str(self.stack), "--kubeconfig", str(kubeconfig or self.kubeconfig),
                                    "--subscription", SUBSCRIPTION, "--arm-endpoint", self.arm.url, *extra])
        out = io.StringIO()
        code = verify_command(args, Console(file=out, width=200), Console(file=io.StringIO()),
                              azure_factory=lambda sub, endpoint: AzureAccess(FakeCredential(), sub or "",
                                                                              endpoint or "", str(self.ca)))
        text = out.getvalue()
        return code, (json.loads(text) if "--json" in extra else {"text": text})

    def run_as_given(self, *args: str) -> tuple[int, Any, str]:
        """verify with exactly `args` after the stack and the fake ARM (no kubeconfig unless given): exit code, the
        --json document (or the text), standard error."""
        parsed = parser().parse_args(["verify", str(self.stack), "--subscription", SUBSCRIPTION,
                                      "--arm-endpoint", self.arm.url, "--json", *args])
        out, err = io.StringIO(), io.StringIO()
        code = verify_command(parsed, Console(file=out, width=200), Console(file=err, width=200),
                              azure_factory=lambda sub, endpoint: AzureAccess(FakeCredential(), sub or "",
                                                                              endpoint or "", str(self.ca)))
        text = out.getvalue()
        return code, json.loads(text) if text.strip().startswith("{") else text, err.getvalue()

    def writes(self) -> list[tuple[str, str]]:
        return [(m, p) for m, p in self.arm.received + self.kube.received if m not in ("GET", "HEAD")]


@contextmanager
def served_world(folder: Path, cluster: dict[str, Any]) -> Iterator[World]:
    """The stack `cluster` as `Pulumi.vfy.yaml` in `folder`, planned, with a fake ARM and API server serving it."""
    stack = folder / "Pulumi.vfy.yaml"
    stack.write_text(yaml.safe_dump({"config": {"gpucluster:cluster": cluster,
                                                "azure-native:subscriptionId": SUBSCRIPTION}}))
    plan = plan_cluster(load_stack_file(stack, "vfy").spec)
    tls = self_signed()
    ca = folder / "ca.pem"
    ca.write_bytes(tls.cert_pem)
    with serve(FakeApi(not_found=ARM_404), tls, folder) as arm, serve(FakeApi(not_found=KUBE_404), tls, folder) as kube:
        yield World(stack, plan, arm, kube, kubeconfig(folder, kube.url, tls), ca, tls, folder)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with served_world(tmp_path_factory.mktemp("verify"), STACK) as served:
        yield served


@pytest.fixture
def live(world: World) -> World:
    world.reset()
    return world


def verdicts(doc: dict[str, Any], status: str) -> list[dict[str, Any]]:
    return [r for r in doc["results"] if r["status"] == status]
