"""The prefix IPAM controller at prod size: 7,500 nodes in 43 scale sets, served in pages by the fake servers
(tests/support/fake_kube.py) in this process, the controller in a process of its own configured as the Deployment configures
it (environment only: KUBE_API, the service-account directory, ARM and IMDS endpoints). Its memory is measured with
tracemalloc over two rounds, every allocation of the controller's process, and bounded generously (100 MiB, against the
pod's 512 MiB limit): a memory bound, not a timing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.fake_kube import FakeAzure, FakeKube
from tests.support.ipam_world import CILIUM, NODES, as_the_controller, pool, populate

ROOT = Path(__file__).resolve().parent.parent
ROUND = """
import json, tracemalloc
from gpucluster.agents import prefix_ipam
controller = prefix_ipam.controller_from_env("kube-system", "gpucluster-prefix-ipam", "client-id")
tracemalloc.start()
report = controller.round()
then = controller.round()  # nothing changed but its own patches: one watch per collection, nothing to write
print(json.dumps({"peak": tracemalloc.get_traced_memory()[1], "read": report.sets_read, "failed": report.sets_failed,
                  "patched": report.patched, "led": report.led, "patched_then": then.patched,
                  "kept": [len(controller.nodes.items), len(controller.cilium.items)]}))
"""


def test_a_round_at_7500_nodes_stays_under_100_mib(tmp_path: Path) -> None:
    kube, azure = as_the_controller(FakeKube(), "replica-a"), FakeAzure(page_size=100)
    sets = {f"pool{n:02d}-z1": 7500 // 43 + (1 if n < 7500 % 43 else 0) for n in range(43)}
    desired = populate(kube, azure, sets, filled=True)
    assert len(desired) == 7500
    behind = sorted(desired)[::750]
    for name in behind:  # ten nodes whose pools are not filled yet
        current = kube.get_object(CILIUM, name)
        assert current is not None
        current["spec"]["ipam"]["pool"] = {}
        kube.put_object(CILIUM, current)
    (tmp_path / "token").write_text("replica-a")
    with kube.running(), azure.running():
        env = {**os.environ, "KUBE_API": kube.url, "KUBE_SA_DIR": str(tmp_path), "ARM_ENDPOINT": azure.url,
               "IMDS_TOKEN_ENDPOINT": f"{azure.url}/metadata/identity/oauth2/token", "POD_NAME": "replica-a",
               "PREFIX_IPAM_KUBE_PER_MINUTE": "100000", "PREFIX_IPAM_ARM_PER_MINUTE": "100000"}
        done = subprocess.run([sys.executable, "-c", ROUND], env=env, cwd=ROOT, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report["led"] and report["read"] == 43 and not report["failed"] and report["patched"] == 10
        assert report["patched_then"] == 0 and report["kept"] == [7500, 7500]
        assert report["peak"] < 100 << 20, f"peak {report['peak'] >> 20} MiB"
        asked = kube.requests("GET", f"^({NODES}|{CILIUM})$")
        lists = [r for r in asked if "watch" not in r.query]
        watches = [r for r in asked if r.query.get("watch") == "1"]
        # The first round lists in pages of 500; the second costs one watch per collection, from the version listed.
        assert lists and all(r.query.get("limit") == "500" for r in lists) and len(lists) == 2 * 15
        assert len(watches) == 2 and all(r.query.get("timeoutSeconds") == "1" for r in watches)
        assert all(pool(kube, n) == set(desired[n]) for n in behind)
