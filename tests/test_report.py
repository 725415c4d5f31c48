"""The plan report as data (--json, summary.json) and as report.html."""

from __future__ import annotations

from collections import Counter
from html.parser import HTMLParser

import pytest

from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.report.html_report import render_report
from gpucluster.report.report_data import limit_usage, report_data
from gpucluster.spec import LimitOverride


@pytest.fixture(scope="module")
def prod_data(prod_spec) -> dict:
    plan = plan_cluster(prod_spec)
    return report_data(plan, "prod", Counter({"azure-native:compute:VirtualMachineScaleSet": 44}), [])


def test_totals_and_zones_add_up(prod_data: dict, prod_spec) -> None:
    """Figures of the shipped stack are in tests/golden/stacks.json; here, that they add up."""
    totals, pools = prod_data["totals"], prod_data["pools"]
    assert totals["nodes"] == sum(p.count for p in prod_spec.pools)
    assert totals["gpus"] == sum(p["gpus"] for p in pools)
    assert totals["infinibandDomains"] == sum(len(p["scaleSets"]) for p in pools if p["infiniband"])
    h100 = next(p for p in pools if p["name"] == "h100")
    count = next(p.count for p in prod_spec.pools if p.name == "h100")
    assert h100["vcpus"] == count * 96 and h100["memoryGib"] == count * 1900 and h100["gpus"] == count * 8
    for key in ("nodes", "gpus", "vcpus", "memoryGib"):
        assert sum(z[key] for z in prod_data["zones"].values()) == totals[key]
        for pool in pools:
            assert sum(z[key] for z in pool["zones"].values()) == pool[key]


def test_zone_loss_matches_the_pools(prod_data: dict) -> None:
    loss = {z["zone"]: z for z in prod_data["zoneLoss"]}
    cp = prod_data["controlPlane"]
    for zone, entry in loss.items():
        assert entry["gpusLost"] == prod_data["zones"][zone]["gpus"]
        members = cp["etcd"]["members"]
        left = len(members) - sum(m["zone"] == zone for m in members)
        assert entry["etcd"] == {"left": left, "of": len(members), "quorumHolds": left >= len(members) // 2 + 1}
        api = cp["apiServers"]
        assert entry["apiServers"] == {"left": api["count"] - api["perZone"][zone], "of": api["count"]}


def test_limits_show_what_is_used_and_what_is_raised(prod_data: dict, dev_spec) -> None:
    limits = {limit["key"]: limit for limit in prod_data["limits"]}
    vnet = limits["privateIpsPerVnet"]
    # prod fits Azure's fixed 65,536 entries with /28 blocks: nothing raised, no exception relied on
    assert vnet["fixed"] and not vnet["raised"] and not vnet["pastFixed"] and not vnet["exceedsDefault"]
    assert vnet["used"] == prod_data["ipPlan"]["entries"]["vnet"] <= 65_536
    assert prod_data["ipPlan"]["podIpsOnNodes"] >= 200_000
    largest_domain = max(s["capacity"] for p in prod_data["pools"] if p["infiniband"] for s in p["scaleSets"])
    assert limits["vmsPerInfinibandDomain"]["used"] == largest_domain
    assert not limits["vmsPerInfinibandDomain"]["exceedsDefault"]
    assert limits["privateIpsPerPeeredGroup"]["used"] is None  # no hub peering in prod
    assert limit_usage(plan_cluster(dev_spec))["privateIpsPerVnet"] < 65_536


def test_a_declared_exception_shows_in_red_as_fixed(dev_spec) -> None:
    """A stack past a fixed limit on a declared Azure exception: summary and report.html say so in red."""
    import io

    from rich.console import Console

    from gpucluster.report.summary import print_summary
    spec = dev_spec.model_copy(update={"limits": dev_spec.limits.model_copy(update={
        "subnets_per_vnet": LimitOverride.model_validate(
            {"value": 4000, "note": "granted", "azureException": {"reference": "case 123"}})})})
    data = report_data(plan_cluster(spec), "dev", Counter(), [])
    row = next(limit for limit in data["limits"] if limit["key"] == "subnetsPerVnet")
    assert row["pastFixed"] and row["exception"] == "case 123"
    html = render_report(data)
    assert '<span class="bad"><b>Azure documents this limit as fixed; relies on a declared Azure exception: case 123' \
        in html
    out = io.StringIO()
    print_summary(Console(file=out, force_terminal=True, width=400), data, [])
    assert "\x1b[1;31mAzure documents this limit as fixed" in out.getvalue()


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
    t = prod_data["totals"]
    assert f"region eastus2 - {t['nodes']:,} nodes, {t['gpus']:,} GPUs, {t['infinibandDomains']} InfiniBand domains" in page
    cp = prod_data["controlPlane"]
    events_in_1 = sum(m["zone"] == "1" for m in cp["eventsEtcd"]["members"])
    assert f"API x{cp['apiServers']['perZone']['1']}" in page and f"events x{events_in_1}" in page  # zone 1
    controlplane = next(b for b in prod_data["ipPlan"]["blocks"] if b["name"] == "controlplane")
    assert controlplane["cidr"] in page and "quorum holds" in page


def test_report_shows_violations(prod_data: dict) -> None:
    data = {**prod_data, "policies": {"mandatory": 1, "advisory": 0, "violations": [{
        "policy": "azure-native-compute-virtualmachinescaleset-no-overprovision", "severity": "high",
        "enforcement": "mandatory", "urn": "urn:x", "message": "overprovision <on>", "remediation": "fix",
        "description": "d"}]}}
    page = render_report(data)
    assert "1 mandatory" in page and "overprovision &lt;on&gt;" in page


def test_the_default_summary_is_what_a_reviewer_reads_and_details_add_the_rest(prod_cli_plan) -> None:
    """prod printed ~280 lines of 160-column tables; the resources by type, node images per scale set, the agents'
    API load, the versions and the first boot now print with `plan --details` (report.html has them always)."""
    import io
    import json

    from rich.console import Console

    from gpucluster.report.summary import print_summary

    _, out = prod_cli_plan
    data = json.loads((out / "summary.json").read_text())
    printed = {}
    for details in (False, True):
        text = io.StringIO()
        print_summary(Console(file=text, width=160), data, [], details=details)
        printed[details] = text.getvalue()
    extra = ("Resources (", "Node images (docs/images.md)", "Node agents against API Priority and Fairness",
             "Versions: Kubernetes", "First boot: when each workload can start")
    assert not [t for t in extra if t in printed[False]] and all(t in printed[True] for t in extra)
    for kept in ("Per zone:", "If a zone is lost", "Control plane (outside the cluster)", "Azure limits", "Policies:"):
        assert kept in printed[False]
    assert len(printed[False].splitlines()) < 150 < len(printed[True].splitlines())
