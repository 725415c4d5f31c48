"""Cost: the catalogue's schema and dates, its normalisation, the planner's arithmetic against hand-computed figures,
the stack's price file, what stays unpriced, the diff of a grown pool and the pack's budget rule (docs/cost.md)."""

from __future__ import annotations

import copy
import json
import shutil
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from gpucluster.catalog.prices import (
    HOURS_PER_MONTH,
    KINDS,
    TERM_HOURS,
    UNIT_HOURS,
    catalogue_document,
    catalogue_from_document,
    is_windows,
    policy_rates,
    price_catalogue,
    rates_of_row,
)
from gpucluster.diff.compare import diff_sides
from gpucluster.diff.cost import cost_delta, cost_lines
from gpucluster.diff.render import diff_section, print_diff
from gpucluster.diff.sides import side_from_document
from gpucluster.errors import SpecError
from gpucluster.offline.policy_runner import run_policies
from gpucluster.planning.cluster_plan import ClusterPlan, plan_cluster
from gpucluster.report.cost_report import cost_data, print_cost
from tests.support.plan_sides import plan_document, stack_raw
from tests.support.policy_mutations import BUDGET, COST_POLICY_MUTATIONS
from tests.support.stacks import ROOT, spec_of
from tools.refresh_prices import ANSWERS, CATALOGUE, kind_and_sku, manifest_answers, refresh, refresh_many, rows_of_answer

DATA = ROOT / "tests" / "data" / "prices"
DEV_QUOTE = "tests/data/prices/dev-quote.yaml"
GB300_QUOTE = "tests/data/prices/gb300-quote.yaml"
TODAY = date(2026, 11, 26)


def _plan(raw: dict[str, Any], today: date = TODAY) -> ClusterPlan:
    return plan_cluster(spec_of(raw), today)


def _dev(**cost: Any) -> dict[str, Any]:
    raw = stack_raw("dev")
    raw["cost"] = cost
    return raw


# The catalogue


def test_every_catalogue_row_is_sourced_dated_and_readable() -> None:
    document = catalogue_document()
    assert document["currencyCode"] == "USD"
    for row in document["rows"]:
        where = f"{row['kind']} {row['armSkuName']} {row['armRegionName']}"
        assert row["kind"] in KINDS, where
        assert row["type"] in ("Consumption", "Reservation"), where
        assert row["unitOfMeasure"] in UNIT_HOURS, where
        assert len(row["source"]) > 20, where
        assert date.fromisoformat(row["asOf"]) <= TODAY, where
        assert not str(row["productName"] or "").endswith("Windows"), where
        assert row["kind"] != "vm" or row["armRegionName"], f"{where}: a VM price holds in one region"
        assert rates_of_row(row), where
        assert row["answer"] is None or (ANSWERS.parent / row["answer"]).is_file(), where
    for entry in document["unpriced"]:
        assert entry["kind"] in KINDS and len(entry["reason"]) > 20


def test_rows_read_from_a_saved_answer_are_what_the_tool_makes_of_it(tmp_path: Path) -> None:
    """Every row naming a saved answer is reproduced from that answer by tools/refresh_prices.py --manifest: no
    figure in the catalogue was typed by hand, and each answer's source and date are the rows'."""
    answers = manifest_answers(ANSWERS / "answers.json")
    assert answers and all(a.path.is_file() and a.as_of <= TODAY and len(a.source) > 40 for a in answers)
    document = catalogue_document()
    from_answers = [r for r in document["rows"] if r["answer"]]
    saved_as = {a.saved_as: a for a in answers}
    for row in from_answers:
        answer = saved_as[row["answer"]]
        assert (row["source"], row["asOf"]) == (answer.source, answer.as_of.isoformat()), row["answer"]
    catalogue, copy = tmp_path / "prices.json", tmp_path / "vm_prices.json"
    shutil.copy(CATALOGUE, catalogue)
    assert refresh_many(answers, catalogue, copy) >= len(from_answers)
    assert json.loads(catalogue.read_text("utf-8")) == document
    assert catalogue.read_text("utf-8") == CATALOGUE.read_text("utf-8")  # byte for byte: the tool wrote it
    assert json.loads(copy.read_text("utf-8")) == json.loads((ROOT / "policies" / "rules" / "vm_prices.json").read_text())


def test_the_saved_answers_are_retail_prices_api_items_of_eastus2() -> None:
    """The committed answers keep the API's items verbatim: each has the fields a Retail Prices answer has."""
    for answer in manifest_answers(ANSWERS / "answers.json"):
        items = json.loads(answer.path.read_text("utf-8"))["Items"]
        assert items, answer.path.name
        for item in items:
            assert {"meterId", "skuId", "productName", "meterName", "armRegionName", "retailPrice", "unitOfMeasure",
                    "type", "serviceName", "effectiveStartDate"} <= set(item), answer.path.name
            assert item["armRegionName"] == "eastus2" and item["currencyCode"] == "USD"


def test_the_tool_keeps_the_network_registry_and_disk_meters_the_plan_prices() -> None:
    answer = json.loads((ANSWERS / "eastus2-network-storage-2026-08-14.json").read_text("utf-8"))
    rows = rows_of_answer(answer, "s", TODAY)
    assert sorted((r["kind"], r["armSkuName"], r["retailPrice"], r["unitOfMeasure"]) for r in rows) == [
        ("disk", "Premium_LRS 128 GiB", 17.92, "1/Month"), ("disk", "Premium_LRS 64 GiB", 9.2801, "1/Month"),
        ("publicIp", "Standard", 0.005, "1 Hour"), ("publicIpPrefixAddress", "Standard", 0.006, "1 Hour"),
        ("registry", "Premium", 1.6666, "1/Day")]  # the "Disk Mount" meters are not the disk's own price
    assert kind_and_sku({"serviceName": "Storage", "productName": "Premium SSD Managed Disks",
                         "meterName": "P30 ZRS Disk"}) == ("disk", "Premium_ZRS 1024 GiB")
    assert kind_and_sku({"serviceName": "Storage", "productName": "Blob Storage", "meterName": "LRS Data Stored"}) is None
    # A monthly price is per 730-hour month, a daily one per 24 hours.
    rates = {r.sku: r.usd_per_hour for row in rows for r in rates_of_row(row)}
    assert rates["Premium_LRS 128 GiB"] == pytest.approx(17.92 / 730)
    assert rates["Premium"] == pytest.approx(1.6666 / 24)


def test_shipped_stacks_price_the_vms_the_catalogue_has_rows_for() -> None:
    """Every shipped stack's pools are priced from the eastus2 answers (the newest answer wins a row it shares with
    an older one); prod's H100 fleet at the row Microsoft's answer gives, never carried from another region."""
    dev = _plan(stack_raw("dev")).cost
    assert dev is not None
    lines = {line.key: line for line in dev.lines}
    t4 = lines["pool:t4"]
    assert t4.rate is not None and t4.rate.region == "eastus2" and t4.rate.answer == "price_answers/eastus2-vm-2026-09-01.json"
    assert t4.hourly == pytest.approx(2 * 0.526)
    assert lines["disk:Premium_LRS 128 GiB"].hourly == pytest.approx(4 * 17.92 / 730)
    assert lines["publicIpPrefix"].hourly == pytest.approx(2 * 0.006)
    assert not [u for u in dev.unpriced if u.what.startswith("pool ")]
    gb300 = _plan(stack_raw("gb300")).cost
    assert gb300 is not None
    system = next(x for x in gb300.lines if x.key == "pool:system")
    assert system.rate is not None and system.rate.usd_per_hour == 0.384 and system.rate.as_of == date(2026, 9, 1)
    prod = _plan(stack_raw("prod")).cost
    assert prod is not None
    h100 = next(x for x in prod.lines if x.key == "pool:h100")
    assert h100.rate is not None and h100.rate.region == "eastus2" and h100.rate.usd_per_hour == 98.32
    assert h100.hourly == pytest.approx(h100.quantity * 98.32)
    assert not [u for u in prod.unpriced if u.what.startswith("pool ")]


def test_gb300_is_listed_as_quote_only_never_priced() -> None:
    catalogue = price_catalogue()
    assert not [r for r in catalogue.rates if r.sku == "Standard_ND128isr_GB300_v6"]
    assert "quote" in (catalogue.unpriced_reason("vm", "Standard_ND128isr_GB300_v6") or "")


def test_the_packs_copy_of_the_vm_rates_equals_the_catalogue() -> None:
    copy = json.loads((ROOT / "policies" / "rules" / "vm_prices.json").read_text("utf-8"))
    assert copy == json.loads(json.dumps(policy_rates(price_catalogue())))


def test_a_row_becomes_hourly_rates_per_option() -> None:
    row = {"armSkuName": "Standard_X", "armRegionName": "r", "type": "Consumption", "meterName": "X",
           "productName": "Virtual Machines X Series", "unitOfMeasure": "1 Hour", "retailPrice": 2.0,
           "savingsPlan": [{"term": "1 Year", "retailPrice": 1.5}, {"term": "3 Years", "retailPrice": 1.0}],
           "source": "s", "asOf": "2026-11-01"}
    assert {r.option: r.usd_per_hour for r in rates_of_row(row)} == {"payg": 2.0, "savingsPlan1y": 1.5,
                                                                      "savingsPlan3y": 1.0}
    assert [(r.option, r.usd_per_hour) for r in rates_of_row({**row, "meterName": "X Spot", "savingsPlan": []})] == \
        [("spot", 2.0)]
    # A reservation's retailPrice is the term's: 8,760 USD for a year is 1 USD/h, 26,280 for three years too.
    assert [(r.option, r.usd_per_hour) for r in rates_of_row({**row, "type": "Reservation", "reservationTerm": "1 Year",
                                                              "retailPrice": 8760.0})] == [("reservation1y", 1.0)]
    assert TERM_HOURS["3 Years"] == 26_280
    assert rates_of_row({**row, "productName": "Virtual Machines X Series Windows"}) == []
    assert rates_of_row({**row, "meterName": "X Low Priority"}) == []
    assert rates_of_row({**row, "type": "DevTestConsumption"}) == []
    assert [r.usd_per_hour for r in rates_of_row({**row, "unitOfMeasure": "1 Day", "retailPrice": 24.0,
                                                  "savingsPlan": []})] == [1.0]
    with pytest.raises(ValueError, match="unitOfMeasure"):
        rates_of_row({**row, "unitOfMeasure": "1 GB/Month"})


def test_refresh_rebuilds_the_vm_rows_from_a_saved_api_answer(tmp_path: Path) -> None:
    catalogue, copy = tmp_path / "prices.json", tmp_path / "vm_prices.json"
    shutil.copy(CATALOGUE, catalogue)
    before = json.loads(catalogue.read_text("utf-8"))
    assert refresh([DATA / "retail_answer.json"], "test answer", date(2026, 11, 25), catalogue, copy) == 4
    after = json.loads(catalogue.read_text("utf-8"))
    # payg (with savings plan), Spot, 1y and 3y reservations: the catalogue's own payg and Spot rows of that size and
    # region are replaced, every other row stays.
    replaced = [row for row in before["rows"] if row["armSkuName"] == "Standard_D4s_v5"
                and row["armRegionName"] == "eastus2" and row["type"] == "Consumption"]
    assert len(replaced) == 2
    assert len(after["rows"]) == len(before["rows"]) + 4 - len(replaced)
    assert all(row in after["rows"] for row in before["rows"] if row not in replaced)
    rates = {r.option: r.usd_per_hour for r in catalogue_from_document(after).rates
             if r.sku == "Standard_D4s_v5" and r.region == "eastus2"}
    assert rates == pytest.approx({"payg": 0.2, "spot": 0.04, "savingsPlan1y": 0.15, "savingsPlan3y": 0.1,
                                   "reservation1y": 1314 / 8760, "reservation3y": 2628 / 26280})
    assert json.loads(copy.read_text("utf-8"))["eastus2"]["Standard_D4s_v5"] == {"payg": 0.2, "spot": 0.04}
    # A second answer of the same meters replaces them, never adds beside them.
    assert refresh([DATA / "retail_answer.json"], "test answer", date(2026, 11, 26), catalogue, copy) == 4
    again = json.loads(catalogue.read_text("utf-8"))
    assert len(again["rows"]) == len(after["rows"])
    assert {r["asOf"] for r in again["rows"] if r["armSkuName"] == "Standard_D4s_v5"} == {"2026-11-26"}


def test_refresh_refuses_what_is_not_an_api_answer(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"items": []}', encoding="utf-8")
    with pytest.raises(ValueError, match="Items"):
        refresh([bad], "x", TODAY, tmp_path / "c.json", tmp_path / "p.json")


# The planner's arithmetic


def test_dev_with_a_price_file_adds_up_by_hand() -> None:
    cost = _plan(_dev(priceFile=DEV_QUOTE)).cost
    assert cost is not None
    hourly = {line.key: line.hourly for line in cost.lines}
    # Hand-computed from tests/data/prices/dev-quote.yaml, the catalogue's eastus2 registry row (1.6666 USD a day,
    # components/catalog/data/price_answers/eastus2-network-storage-2026-08-14.json) and its region-less NAT gateway
    # and load balancer rows:
    assert hourly["pool:system"] == pytest.approx(2 * 0.25)
    assert hourly["pool:t4"] == pytest.approx(2 * 0.5)
    assert hourly["pool:confidential"] == pytest.approx(1 * 7)
    assert hourly["controlPlane:apiServers"] == pytest.approx(1 * 0.25)
    assert hourly["controlPlane:etcd"] == pytest.approx(3 * 0.75)
    assert hourly["registry"] == pytest.approx(1.6666 / 24)
    assert hourly["natGateway"] == pytest.approx(0.045)
    assert hourly["publicIpPrefix"] == pytest.approx(2 * 0.01)  # a /31
    assert hourly["loadBalancer:apiserver"] == pytest.approx(0.025)
    assert hourly["deployRunner"] == pytest.approx(1 * 0.25)  # one D4s_v5
    # Managed OS disks: system 2 + confidential 1 + API server 1 at 128 GiB (the T4s' fit the resource disk), the
    # three etcd members' and the deployment runner's at 64 GiB; 73 and 36.5 USD per 730-hour month.
    assert hourly["disk:Premium_LRS 128 GiB"] == pytest.approx(4 * 73 / 730)
    assert hourly["disk:Premium_LRS 64 GiB"] == pytest.approx(4 * 36.5 / 730)
    # The registry's private endpoint and its ACR Tasks agent pool (one S1), priced by the file's kinds.
    assert hourly["registry:privateEndpoint"] == pytest.approx(0.01)
    assert hourly["registry:agentPool"] == pytest.approx(0.1)
    total = 0.5 + 1 + 7 + 0.25 + 2.25 + 0.25 + 1.6666 / 24 + 0.045 + 0.02 + 0.025 + 0.4 + 0.2 + 0.01 + 0.1
    assert cost.hourly_total == pytest.approx(total)
    # What has no rate is listed with why, never left out: the workspace's ingestion (billed per sample) and the
    # snapshots' storage (billed per GB stored).
    assert [u.what.split(":")[0] for u in cost.unpriced] == [
        "Azure Monitor workspace", "etcd snapshots' storage account (Standard_ZRS)"]
    by_key = {line.key: line for line in cost.lines}
    assert by_key["pool:t4"].rate is not None and by_key["pool:t4"].rate.from_price_file
    assert by_key["natGateway"].rate is not None and not by_key["natGateway"].rate.from_price_file
    # Warm capacity: one T4 balloon node; the team's 2 GPUs are the whole T4 flavor.
    assert [(w.pool, w.nodes, w.hourly) for w in cost.warm] == [("t4", 1, pytest.approx(0.5))]
    (team,) = cost.teams
    assert team.nominal_hourly == pytest.approx(1.0)


def test_summary_figures_monthly_at_730_hours() -> None:
    plan = _plan(_dev(priceFile=DEV_QUOTE))
    data = cost_data(plan)
    assert plan.cost is not None and data is not None and data["hoursPerMonth"] == HOURS_PER_MONTH == 730
    assert data["monthly"]["total"] == round(plan.cost.hourly_total * 730, 4)
    assert data["hourly"]["pools"] == {"system": 0.5, "t4": 1.0, "confidential": 7.0}
    assert data["monthly"]["pools"]["confidential"] == 7 * 730
    line = next(x for x in data["lines"] if x["key"] == "pool:t4")
    assert line["priceFile"] and "price file tests/data/prices/dev-quote.yaml" in line["basis"]
    assert not data["complete"] and data["unpriced"][0]["reason"]


def test_the_pricing_option_picks_the_rate() -> None:
    raw = _dev(priceFile=DEV_QUOTE)
    raw["pools"][1]["pricing"] = "reservation1y"
    cost = _plan(raw).cost
    assert cost is not None
    (line,) = [x for x in cost.lines if x.key == "pool:t4"]
    assert line.rate is None and line.option == "reservation1y"
    assert any("no reservation1y price" in u.reason for u in cost.unpriced)


def test_gb300_without_a_price_file_is_unpriced_as_quote_only() -> None:
    cost = _plan(stack_raw("gb300")).cost
    assert cost is not None
    assert cost.pool_hourly("gb300") is None
    reason = next(u.reason for u in cost.unpriced if u.what.startswith("pool gb300"))
    assert "sold by quote" in reason and "cost.priceFile" in reason
    assert all(d.hourly is None for d in cost.domains)


def test_gb300_with_a_price_file_prices_pools_racks_and_the_team() -> None:
    raw = stack_raw("gb300")
    raw["cost"] = {"priceFile": GB300_QUOTE}
    raw["pools"][1]["pricing"] = "reservation3y"
    cost = _plan(raw).cost
    assert cost is not None
    assert cost.pool_hourly("gb300") == pytest.approx(108 * 100)
    assert cost.pool_hourly("system") == pytest.approx(3 * 0.5)
    # Six racks of 18 VMs, two per interconnect group.
    assert [(d.rack, d.nodes, d.hourly) for d in cost.domains] == [(g, 18, pytest.approx(1800)) for g in
                                                                   ("ig1", "ig1", "ig2", "ig2", "ig3", "ig3")]
    # frontier's 216 GPUs are half of the 432: half the rack pool's cost.
    (team,) = cost.teams
    assert team.nominal_hourly == pytest.approx(0.5 * 10_800)
    assert not any(u.what.startswith("pool gb300") for u in cost.unpriced)
    # Without the pool's pricing the quote (a 3-year reservation rate) does not apply: still unpriced, with why.
    raw["pools"][1].pop("pricing")
    payg = _plan(raw).cost
    assert payg is not None and payg.pool_hourly("gb300") is None


def test_team_borrowing_and_lending_are_shown_apart_from_quota() -> None:
    raw = _dev(priceFile=DEV_QUOTE)
    raw["pools"][1]["count"] = 4
    raw["teams"] = [{"name": "research", "quota": {"gpus": 2}, "borrowingLimit": {"gpus": 1},
                     "lendingLimit": {"gpus": 1}}]
    cost = _plan(raw).cost
    assert cost is not None
    (team,) = cost.teams
    pool = 4 * 0.5
    assert (team.nominal_hourly, team.borrowing_hourly, team.lending_hourly) == pytest.approx(
        (pool * 2 / 4, pool * 1 / 4, pool * 1 / 4))


def test_stale_prices_warn_past_the_stated_age() -> None:
    # The oldest rate dev uses with its price file is the catalogue's eastus2 network rows' (2026-08-14): 109 days old
    # on 2026-12-01, 140 days on 2027-01-01.
    raw = _dev(priceFile=DEV_QUOTE, maxPriceAgeDays=120)
    fresh = _plan(raw, date(2026, 12, 1)).cost
    assert fresh is not None and not fresh.warnings
    late = _plan(raw, date(2027, 1, 1)).cost
    assert late is not None and len(late.warnings) == 1
    assert "more than 120 days before 2027-01-01" in late.warnings[0]


def test_spot_is_refused_on_infiniband_gang_pools() -> None:
    raw = stack_raw("prod")
    raw["pools"][1]["priority"] = "spot"
    with pytest.raises(SpecError) as error:
        _plan(raw)
    assert [p.path for p in error.value.problems] == ["cluster.pools[1].priority"]
    assert "InfiniBand gang pool" in error.value.problems[0].message


def test_spot_pricing_follows_priority() -> None:
    raw = _dev()
    raw["pools"][1]["pricing"] = "spot"
    with pytest.raises(SpecError, match="set priority: spot"):
        spec_of(raw)
    raw["pools"][1]["priority"] = "spot"
    raw["pools"][1].pop("pricing")
    assert spec_of(raw).pools[1].pricing_option == "spot"
    raw["pools"][1]["pricing"] = "reservation1y"
    with pytest.raises(SpecError, match="Spot rate"):
        spec_of(raw)


@pytest.mark.parametrize(("content", "expect"), [
    (None, "no such file"),
    ("rows: [", "invalid YAML"),
    ("source: x y z\nasOf: 2026-11-01\nrows: [{sku: Standard_D4s_v5}]\n", "usdPerHour"),
    # two rows for one size and option would price it 2 or 2,000 USD/h by their order
    ("source: x y z\nasOf: 2026-11-01\nrows: [{sku: Standard_D4s_v5, usdPerHour: 2}, "
     "{sku: Standard_D4s_v5, usdPerHour: 2000}]\n", "rows[0] and rows[1] both price vm Standard_D4s_v5"),
])
def test_a_bad_price_file_is_one_line_naming_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     content: str | None, expect: str) -> None:
    (tmp_path / "Pulumi.yaml").write_text("name: x\n", encoding="utf-8")
    (tmp_path / "__main__.py").write_text("", encoding="utf-8")
    if content is not None:
        (tmp_path / "quote.yaml").write_text(content, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SpecError) as error:
        _plan(_dev(priceFile="quote.yaml"))
    assert all(p.path.startswith("cluster.cost.priceFile") for p in error.value.problems)
    assert expect in str(error.value)


@pytest.mark.parametrize("name", ["/etc/prices.yaml", "../prices.yaml", "prices/../../x.yaml", "prices.txt"])
def test_the_price_file_stays_inside_the_project(name: str) -> None:
    with pytest.raises(SpecError) as error:
        spec_of(_dev(priceFile=name))
    assert [p.path for p in error.value.problems] == ["cluster.cost.priceFile"]


def test_the_terminal_shows_a_short_cost_block() -> None:
    console = Console(record=True, width=200)
    print_cost(console, {"cost": cost_data(_plan(_dev(priceFile=DEV_QUOTE)))})
    lines = console.export_text().splitlines()
    assert lines[0].startswith("Cost in eastus2: 10 of 10 machines priced, 2 rows unpriced: the priced rows alone come to "
                               "12.12 USD/h, 8,847.19 USD/month at 730 h; price file tests/data/prices/dev-quote.yaml")
    assert lines[1] == "  pools USD/h: system 0.50, t4 1.00, confidential 7.00"
    assert len(lines) == 4 and lines[3].startswith("  unpriced (why: summary.json cost.unpriced")


# Review: the diff and the budget


def test_the_diff_of_a_grown_pool_states_its_cost(dev_out: Path) -> None:
    base_raw, head_raw = _dev(priceFile=DEV_QUOTE), _dev(priceFile=DEV_QUOTE)
    head_raw["pools"][1]["count"] = 4
    # The base is the shipped dev plan (a price file changes no resource), with the summary its price file gives.
    preview = json.loads((dev_out / "preview.json").read_text("utf-8"))
    summary = json.loads((dev_out / "summary.json").read_text("utf-8"))
    base = side_from_document("base", preview, {**summary, "cost": cost_data(_plan(base_raw))})
    head_preview, head_summary = plan_document(head_raw)
    diff = diff_sides(base, side_from_document("head", head_preview, head_summary))
    assert diff.capacity["delta"]["pools"]["t4"]["nodes"] == 2
    delta = diff.cost
    assert delta is not None
    assert delta["pools"]["t4"] == {"baseHourly": 1.0, "headHourly": 2.0, "deltaHourly": 1.0, "deltaMonthly": 730.0}
    assert delta["pools"]["system"]["deltaHourly"] == 0.0
    assert delta["total"]["deltaHourly"] == pytest.approx(delta["total"]["headHourly"] - delta["total"]["baseHourly"])
    console = Console(record=True, width=300)
    print_diff(console, diff)
    printed = console.export_text().splitlines()
    assert printed[1].startswith(f"cost: +{delta['total']['deltaHourly']:,.2f} USD/h, ")
    assert "cost of pool t4: +1.00 USD/h, +730.00 USD/month (1.00 -> 2.00 USD/h)" in printed
    assert not any("cost of pool system" in line for line in printed)
    assert "cost of pool t4" in diff_section(diff.as_dict())


@pytest.mark.parametrize("hourly", [
    {"total": "12", "pools": {"t4": True}},
    {"total": float("nan"), "pools": ["t4"]},
    {"total": None, "pools": {"t4": {"x": 1}}},
])
def test_a_summary_figure_that_is_not_a_number_reads_as_unpriced(dev_out: Path, hourly: dict[str, Any]) -> None:
    preview = json.loads((dev_out / "preview.json").read_text("utf-8"))
    good = side_from_document("base", preview, {"cost": {"hourly": {"total": 1.0, "pools": {"t4": 1.0}}}})
    odd = side_from_document("head", preview, {"cost": {"hourly": hourly, "hoursPerMonth": True}})
    delta = cost_delta(good, odd)
    assert delta is not None and delta["total"]["deltaHourly"] is None and delta["hoursPerMonth"] == 730
    assert all(line.count("unpriced") for line in cost_lines(delta))


def test_a_side_without_cost_says_so() -> None:
    assert cost_lines(None)[0].startswith("cost: not known")


DEV_RATES = {"Standard_D4s_v5": 0.25, "Standard_NC4as_T4_v3": 0.5, "Standard_NCC40ads_H100_v5": 7, "Standard_L8s_v3": 0.75}


def _budget(steps: list[dict[str, Any]], **config: Any) -> list[str]:
    return [v.message for v in run_policies(steps, {BUDGET: config}) if v.source == BUDGET]






def test_the_budget_rule_is_off_by_default_and_fails_a_stack_over_it(dev_out: Path) -> None:
    steps = json.loads((dev_out / "preview.json").read_text("utf-8"))["steps"]
    assert _budget(steps) == []
    # Machines by hand: 4 x D4s_v5 (two system, one API server, the deployment runner) + 2 T4 + 1 NCC40ads + 3 etcd
    # L8s_v3 = 11.25 USD/h.
    assert _budget(steps, maxHourlyUsd=11.25, usdPerHour=DEV_RATES) == []
    (message,) = _budget(steps, maxHourlyUsd=10.5, usdPerHour=DEV_RATES)
    assert "cost 11.25 USD/h" in message and "budget of 10.50 USD/h" in message
    quoted = copy.deepcopy(steps)
    next(s["newState"] for s in quoted if s["newState"]["urn"].endswith("::t4-z1-00"))["inputs"]["sku"]["name"] = (
        "Standard_ND128isr_GB300_v6")
    (unpriced,) = _budget(quoted, maxHourlyUsd=10.5)
    assert "cannot be checked" in unpriced and "Standard_ND128isr_GB300_v6" in unpriced
    for mutate, _ in COST_POLICY_MUTATIONS:
        grown = copy.deepcopy(steps)
        mutate(grown)
        (over,) = _budget(grown, maxHourlyUsd=11.25, usdPerHour=DEV_RATES)
        assert "cost 11.75 USD/h" in over and "by 0.50 USD/h, 365 USD per 730-hour month" in over


def test_a_windows_meter_never_prices_a_linux_pool_whatever_the_answers_order() -> None:
    """The confidential H100's Windows row is "Virtual Machines NCCadsv5 Srs Win" (8.82 USD/h beside Linux's 6.98):
    read in the saved order or reversed, the catalogue keeps the Linux rate."""
    from tools.refresh_prices import rows_of_answer

    answer = json.loads((ANSWERS / "eastus2-vm-2026-09-01.json").read_text("utf-8"))
    backwards = {**answer, "Items": list(reversed(answer["Items"]))}
    for document in (answer, backwards):
        rows = rows_of_answer(document, "s", TODAY)
        payg = {r.usd_per_hour for row in rows for r in rates_of_row(row)
                if r.sku == "Standard_NCC40ads_H100_v5" and r.option == "payg"}
        assert payg == {6.98}, payg
    assert is_windows({"productName": "Virtual Machines NCCadsv5 Srs Win"})
    assert is_windows({"productName": "Virtual Machines Dv5 Series Windows"})
    assert not is_windows({"productName": "Virtual Machines NCCadsv5 Srs"})
    assert not is_windows({"productName": "Virtual Machines Winterfell Series"})


def test_a_pool_whose_pricing_option_has_no_rate_is_not_a_saving(dev_out: Path) -> None:
    """Moving the GPU pool to a savings plan and the CPU pool to a reservation the catalogue has no rate for leaves
    both unpriced on head: the diff compares the pools priced on both sides and names the others, instead of
    printing their whole cost as a saving."""
    preview = json.loads((dev_out / "preview.json").read_text("utf-8"))
    base = side_from_document("base", preview, {"cost": {"complete": True, "hourly": {
        "total": 322_700.0, "pools": {"h100": 320_000.0, "cpu": 2_657.78, "system": 42.22}}}})
    head = side_from_document("head", preview, {"cost": {"complete": False, "hourly": {
        "total": 43.22, "pools": {"h100": None, "cpu": None, "system": 43.22}}}})
    delta = cost_delta(base, head)
    assert delta is not None
    assert delta["total"]["deltaHourly"] == 1.0 and delta["total"]["unpricedPools"] == ["cpu", "h100"]
    first = cost_lines(delta)[0]
    assert first.startswith("cost: +1.00 USD/h") and "priced on one side only: cpu, h100" in first
    assert "-322" not in first


def test_a_spot_price_holds_until_its_rows_end_date_and_no_later() -> None:
    """The Retail Prices API dates Spot meters month by month (effectiveEndDate 2026-09-30 on the saved answer's
    Spot rows): within the month the dev T4 pool's Spot rate prices it, after it the pool is unpriced, with why."""
    raw = _dev()
    raw["pools"][1]["priority"] = "spot"
    within = _plan(raw, date(2026, 9, 15)).cost
    assert within is not None
    [line] = [li for li in within.lines if li.sku == "Standard_NC4as_T4_v3" and li.option == "spot"]
    assert line.rate is not None and line.rate.until == date(2026, 9, 30)
    after = _plan(raw, date(2026, 10, 1)).cost
    assert after is not None
    [gone] = [li for li in after.lines if li.sku == "Standard_NC4as_T4_v3" and li.option == "spot"]
    assert gone.rate is None
    [why] = [u.reason for u in after.unpriced if "Standard_NC4as_T4_v3" in u.reason]
    assert "spot price for vm Standard_NC4as_T4_v3 in eastus2 ended on 2026-09-30" in why
    assert "refresh it with tools/refresh_prices.py" in why


def test_refreshing_keeps_a_rows_end_date() -> None:
    from tools.refresh_prices import rows_of_answer

    item = {"armSkuName": "Standard_D4s_v5", "armRegionName": "eastus2", "serviceName": "Virtual Machines",
            "productName": "Virtual Machines Dv5 Series", "meterName": "D4s v5 Spot", "type": "Consumption",
            "unitOfMeasure": "1 Hour", "retailPrice": 0.04, "effectiveStartDate": "2026-09-01T00:00:00Z",
            "effectiveEndDate": "2026-09-30T23:59:00Z"}
    [row] = rows_of_answer({"Items": [item]}, "a test answer", date(2026, 9, 1))
    assert row["effectiveEndDate"] == "2026-09-30T23:59:00Z"


def test_a_partly_priced_cluster_says_how_much_is_priced_before_any_sum() -> None:
    """gb300 without a price file: its GB300 VMs have no list price, so the line leads with the machines priced."""
    console = Console(record=True, width=300)
    data = cost_data(_plan(stack_raw("gb300")))
    assert data is not None
    print_cost(console, {"cost": data})
    first = console.export_text().splitlines()[0]
    priced, total = data["machines"]["priced"], data["machines"]["total"]
    assert priced < total
    assert first.startswith(f"Cost in {data['region']}: {priced:,} of {total:,} machines priced, ")
    assert first.index("machines priced") < first.index("USD/h")
