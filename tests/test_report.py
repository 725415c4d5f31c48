"""The plan report as data (--json, summary.json) and as report.html."""

from __future__ import annotations

from collections import Counter
from html.parser import HTMLParser

import pytest

from components.offline.html_report import render_report
from components.offline.report_data import limit_usage, report_data
from components.planning.cluster_plan import plan_cluster


@pytest.fixture(scope="module")
def prod_data(prod_spec) -> dict:
    plan = plan_cluster(prod_spec)
    return report_data(plan, "prod", Counter({"azure-native:compute:VirtualMachineScaleSet": 44}), [])


def test_totals_and_zones_add_up(prod_data: dict) -> None:
    totals, pools = prod_data["totals"], prod_data["pools"]
    assert totals["nodes"] == 7500 and totals["gpus"] == 25_064 and totals["infinibandDomains"] == 32
    h100 = next(p for p in pools if p["name"] == "h100")
    assert h100["vcpus"] == 3125 * 96 and h100["memoryGib"] == 3125 * 1900
    for key in ("nodes", "gpus", "vcpus", "memoryGib"):
        assert sum(z[key] for z in prod_data["zones"].values()) == totals[key]
        for pool in pools:
            assert sum(z[key] for z in pool["zones"].values()) == pool[key]


def test_zone_loss_matches_the_pools(prod_data: dict) -> None:
    loss = {z["zone"]: z for z in prod_data["zoneLoss"]}
    assert [loss[z]["gpusLost"] for z in ("1", "2", "3")] == [8624, 8624, 7816]
    assert loss["3"]["etcd"] == {"left": 4, "of": 5, "quorumHolds": True}
    assert loss["1"]["apiServers"] == {"left": 3, "of": 5}


def test_limits_show_what_is_used_and_what_is_raised(prod_data: dict, dev_spec) -> None:
    limits = {limit["key"]: limit for limit in prod_data["limits"]}
    vnet = limits["privateIpsPerVnet"]
    assert vnet["raised"] and vnet["exceedsDefault"] and vnet["used"] == prod_data["ipPlan"]["privateIps"]["needed"]
    assert limits["vmsPerInfinibandDomain"]["used"] == 98 and not limits["vmsPerInfinibandDomain"]["exceedsDefault"]
    assert limits["privateIpsPerPeeredGroup"]["used"] is None  # no hub peering in prod
    assert limit_usage(plan_cluster(dev_spec))["privateIpsPerVnet"] < 65_536


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: Counter[str] = Counter()
        self.refs: list[str] = []
        self.titles: list[str] = []
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1
        self.refs += [v or "" for k, v in attrs if k in ("src", "href")]
        self._in_title = tag == "title"

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.titles.append(data)
            self._in_title = False


def test_report_is_self_contained_and_draws_every_domain(prod_data: dict) -> None:
    page = render_report(prod_data)
    parsed = _Collector()
    parsed.feed(page)
    assert parsed.tags["svg"] == 2 and parsed.tags["script"] == 0 and parsed.refs == []
    assert "<link" not in page and "@import" not in page
    sets = [s for p in prod_data["pools"] for s in p["scaleSets"]]
    for s in sets:
        assert any(t.startswith(f"{s['name']}: {s['capacity']} VMs") for t in parsed.titles), s["name"]
    assert "region eastus2 - 7,500 nodes, 25,064 GPUs, 32 InfiniBand domains" in page
    assert "API x2" in page and "events x1" in page  # control plane in zone 1
    assert "10.0.0.0/26" in page and "quorum holds" in page


def test_report_shows_violations(prod_data: dict) -> None:
    data = {**prod_data, "policies": {"mandatory": 1, "advisory": 0, "violations": [{
        "policy": "azure-native-compute-virtualmachinescaleset-no-overprovision", "severity": "high",
        "enforcement": "mandatory", "urn": "urn:x", "message": "overprovision <on>", "remediation": "fix",
        "description": "d"}]}}
    page = render_report(data)
    assert "1 mandatory" in page and "overprovision &lt;on&gt;" in page
