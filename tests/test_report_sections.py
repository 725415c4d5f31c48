"""report.html carries what the plan decides beyond the machines - control-plane sizing, team queues and quotas,
balloons, egress - with the dev plan's own figures, and a change against a base plan comes first."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from gpucluster.diff.compare import diff_sides
from gpucluster.diff.sides import Side
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.report.html_report import render_report
from gpucluster.simulation.check import plan_checked
from tests.support.stacks import stack_spec


class _Sections(HTMLParser):
    """h2 titles in page order, each with the rows (cell texts) of the tables under it."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: list[tuple[str, list[list[str]]]] = []
        self._in: str | None = None
        self._text = ""

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in ("h2", "td", "th"):
            self._in, self._text = tag, ""
        elif tag == "tr" and self.sections:
            self.sections[-1][1].append([])

    def handle_endtag(self, tag: str) -> None:
        if tag == "h2":
            self.sections.append((self._text.strip(), []))
        elif tag in ("td", "th") and self.sections:
            self.sections[-1][1][-1].append(self._text.strip())
        if tag == self._in:
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in:
            self._text += data


def _sections(page: str) -> dict[str, list[list[str]]]:
    parser = _Sections()
    parser.feed(page)
    return dict(parser.sections)


def _section(sections: dict[str, list[list[str]]], title: str) -> list[list[str]]:
    [rows] = [rows for name, rows in sections.items() if name.startswith(title)]
    return rows


@pytest.fixture(scope="module")
def dev_plan() -> ClusterPlan:
    return plan_checked(stack_spec("dev"))


@pytest.fixture(scope="module")
def dev_sections(dev_out: Path) -> dict[str, list[list[str]]]:
    """The report `gpucluster plan dev` wrote."""
    return _sections((dev_out / "report.html").read_text())


def test_control_plane_sizing(dev_sections: dict, dev_plan: ClusterPlan) -> None:
    rows = _section(dev_sections, "Control plane sizing")
    api, etcd = dev_plan.control_plane.api, dev_plan.control_plane.etcd
    [api_row] = [r for r in rows if r[:1] == ["API servers"]]
    assert api_row[1:6] == [str(api.count), api.size.name, str(api.size.vcpus), str(api.size.memory_gib),
                            str(api.vcpus_needed)]
    [etcd_row] = [r for r in rows if r[:1] == ["etcd"]]
    assert etcd_row[1:5] == [f"{len(etcd.members)} (quorum {etcd.quorum})", etcd.size.name, str(etcd.size.vcpus),
                             str(etcd.size.memory_gib)]
    assert etcd_row[7] == f"quota-backend {etcd.quota_backend_bytes / 2**30:g} GiB"


def test_node_agents_against_their_seats(dev_sections: dict, dev_plan: ClusterPlan) -> None:
    rows = _section(dev_sections, "Node agents and API Priority and Fairness")
    load = dev_plan.agent_load
    assert load is not None and len(rows) == len(load.agents) + 1
    nfd = next(a for a in load.agents if a.service_account == "node-feature-discovery")
    [row] = [r for r in rows if r[:2] == [f"{nfd.namespace}/{nfd.name}", nfd.service_account]]
    assert row[2:5] == [f"{nfd.nodes:,}", "2", f"{nfd.requests_per_second:,.1f}"]


def test_teams_and_quotas(dev_sections: dict, dev_plan: ClusterPlan) -> None:
    rows = _section(dev_sections, f"Teams and quotas (Kueue cohort {dev_plan.scheduling.cohort})")
    [team] = dev_plan.scheduling.teams
    [quota] = team.flavors
    assert [team.name, team.namespace, str(team.weight), quota.flavor, f"{quota.nominal.gpus:,}",
            f"{quota.nominal.cpus:,}", f"{quota.nominal.memory_gib:,}", "none", "none"] in rows
    assert stack_spec("dev").teams[0].quota.gpus == quota.nominal.gpus == 2  # the stack's own figure
    flavor = next(f for f in dev_plan.scheduling.flavors if f.name == quota.flavor)
    [flavor_row] = [r for r in rows if r[:2] == [flavor.name, flavor.pool.name]]
    assert flavor_row[3].startswith(f"{flavor.capacity.gpus} GPUs, {flavor.capacity.cpus} vCPUs")


def test_balloons(dev_sections: dict, dev_plan: ClusterPlan) -> None:
    rows = _section(dev_sections, "Balloons")
    [balloon] = dev_plan.balloons
    assert [balloon.name, balloon.pool.name, f"{balloon.replicas} of {balloon.pool.nodes} nodes", str(balloon.gpus),
            f"{balloon.cpu_millis / 1000:g}", f"{balloon.memory_mib / 1024:.1f}", "balloon"] in rows


def test_egress(dev_sections: dict, dev_plan: ClusterPlan) -> None:
    e = dev_plan.egress
    assert _section(dev_sections, "Egress")[1] == [
        f"/{e.prefix_length}", str(e.public_ips), str(e.public_ips_needed), f"{e.snat_ports:,}", str(e.nodes),
        str(e.snat_ports_per_node), str(e.idle_timeout_minutes)]


def test_the_change_comes_first(dev_out: Path) -> None:
    """Before: the change against the base plan sat below the pools, IP plan, limits and versions."""
    data = json.loads((dev_out / "summary.json").read_text())
    urn = "urn:pulumi:dev::gpucluster::azure-native:network:VirtualNetwork::vnet"
    state = {"urn": urn, "type": "azure-native:network:VirtualNetwork", "custom": True}
    diff = diff_sides(Side("base", {urn: {**state, "inputs": {"a": 1}}}, {}),
                      Side("head", {urn: {**state, "inputs": {"a": 2}}}, {}))
    titles = list(_sections(render_report({**data, "diff": diff.as_dict()})))
    assert titles[0] == "Change against base" and titles[1] == "The cluster"
    assert "Change against base" not in _sections(render_report(data))
