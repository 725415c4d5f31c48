"""`gpucluster verify` before the first `pulumi up` (`--azure-only`: the subscription's providers, features, sizes and
quota, no kubeconfig) and from a place the API servers do not answer (one failure at once, not a timeout per check),
against the fake ARM and API server of tests/support/verify_world.py."""

from __future__ import annotations

import socket
from pathlib import Path

from gpucluster.verify.command import PRE_DEPLOY
from tests.support.verify_fakes import kubeconfig
from tests.support.verify_world import World


def test_azure_only_checks_the_subscription_before_anything_is_deployed(live: World) -> None:
    code, doc, _ = live.run_as_given("--azure-only")
    # azure.existing-network has nothing to read for a stack with its own VNet (tests/test_existing_vnet.py reads one)
    assert {r["check"] for r in doc["results"]} == set(PRE_DEPLOY) - {"azure.existing-network"}, doc["results"]
    assert live.kube.received == [], "no kubeconfig read, no API server asked"
    assert code in (0, 1)


def test_azure_only_refuses_what_reads_the_cluster(live: World) -> None:
    code, _, err = live.run_as_given("--azure-only", "--kubeconfig", str(live.kubeconfig), "--nccl")
    assert code == 2
    assert "--kubeconfig: reads the cluster: drop it, or drop --azure-only" in err and "--nccl:" in err


def test_an_api_server_that_does_not_answer_is_one_failure_at_once(live: World, tmp_path: Path) -> None:
    with socket.socket() as held:  # a port nothing answers on
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
    config = kubeconfig(tmp_path, f"https://127.0.0.1:{port}", live.tls)
    code, doc, _ = live.run_as_given("--kubeconfig", str(config))
    cluster = [r for r in doc["results"] if r["check"].startswith("cluster.")]
    assert code == 1 and [r["check"] for r in cluster] == ["cluster.reachable"], cluster
    assert cluster[0]["detail"].startswith(f"not reachable from here: https://127.0.0.1:{port} did not answer")
    assert "deployment runner" in cluster[0]["fix"]
    assert any(r["check"] == "azure.providers" for r in doc["results"]), "the Azure checks still ran"
