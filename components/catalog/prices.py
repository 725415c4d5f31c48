"""Azure list prices, dated and sourced (components/catalog/facts/prices.json, docs/cost.md).

Rows keep the Azure Retail Prices API's fields (api-version 2023-01-01-preview, learn.microsoft.com
rest/api/cost-management/retail-prices/azure-retail-prices): `armSkuName`, `armRegionName`, `type` (Consumption or
Reservation), `meterName` (a Spot meter ends in " Spot"), `productName` (Linux and Windows rows differ only there:
"... Series Windows"), `reservationTerm`, `unitOfMeasure`, `retailPrice` and `savingsPlan[]`. Here each row is turned
into hourly rates, one per pricing option it carries.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from functools import cache
from typing import Any, get_args

from gpucluster.catalog.fact_files import load_facts
from gpucluster.spec.cost import PriceFile, PriceKind

HOURS_PER_MONTH = 730
"""Monthly figures are hourly x 730, the month Azure's price pages and third-party estimators use (c3x.dev's Azure
pages: "c3x assumes 730 hours/month")."""
TERM_HOURS = {"1 Year": 365 * 24, "3 Years": 3 * 365 * 24}
"""A Reservation row's retailPrice is the whole term's price; per hour it is divided by the term's hours."""
UNIT_HOURS = {"1 Hour": 1, "1 Day": 24, "1/Day": 24, "1/Month": HOURS_PER_MONTH}
"""The API's units a row may carry (it writes both "1 Day" and "1/Day"); a monthly price is per 730-hour month."""
KINDS: tuple[str, ...] = get_args(PriceKind)
"""What a row prices. `disk` SKUs read "<storage account type> <GiB> GiB" (e.g. "Premium_LRS 128 GiB") and
`snapshotStorage` SKUs are storage account SKUs (e.g. "Standard_ZRS"), priced per GB-month."""
_TERM_OPTION = {"1 Year": "1y", "3 Years": "3y"}


@dataclass(frozen=True)
class Rate:
    kind: str
    sku: str
    region: str
    """'' when the source states one price with no region."""
    option: str
    usd_per_hour: float
    source: str
    as_of: date
    from_price_file: bool = False
    """A rate the stack's price file gave (negotiated or quoted), not a list price."""
    answer: str | None = None
    """The saved Retail Prices API answer the rate was read from (a file under components/catalog/data/), if any."""
    until: date | None = None
    """The row's `effectiveEndDate` (the API dates Spot meters month by month): past it the rate is gone."""


@dataclass(frozen=True)
class PriceCatalogue:
    rates: tuple[Rate, ...]
    unpriced: dict[tuple[str, str], str]
    """(kind, SKU) -> why no price is published; SKU `*`: every SKU of the kind."""

    def unpriced_reason(self, kind: str, sku: str) -> str | None:
        return self.unpriced.get((kind, sku)) or self.unpriced.get((kind, "*"))

    def find(self, kind: str, sku: str, region: str, option: str, on: date | None = None) -> Rate | None:
        """The rate for the region, else a region-less one; a price-file rate before a catalogue one. `on`: leave
        out rates whose row ended before that day."""
        matches = [r for r in self.rates if r.kind == kind and r.sku == sku and r.option == option
                   and r.region in (region, "") and (on is None or r.until is None or r.until >= on)]
        matches.sort(key=lambda r: (not r.from_price_file, r.region != region))
        return matches[0] if matches else None

    def ended(self, kind: str, sku: str, region: str, option: str, on: date) -> Rate | None:
        """The rate `find` would give but for its end date, if it ended before `on`."""
        found = self.find(kind, sku, region, option)
        return found if found is not None and found.until is not None and found.until < on else None

    def regions(self, kind: str, sku: str, option: str) -> list[str]:
        return sorted({r.region for r in self.rates if r.kind == kind and r.sku == sku and r.option == option})

    def overlaid(self, rates: tuple[Rate, ...]) -> PriceCatalogue:
        return PriceCatalogue(self.rates + rates, self.unpriced)


WINDOWS_PRODUCT_SUFFIXES = ("Windows", "Win")
"""How the Retail Prices API marks a Windows meter: its productName ends in the word "Windows" ("Virtual Machines
Dv5 Series Windows") or, for the shortened series names, "Win" ("Virtual Machines NCCadsv5 Srs Win", beside the
Linux row "Virtual Machines NCCadsv5 Srs": components/catalog/data/price_answers/eastus2-vm-2026-09-01.json)."""


def is_windows(row: dict[str, Any]) -> bool:
    words = str(row.get("productName") or "").split()
    return bool(words) and words[-1] in WINDOWS_PRODUCT_SUFFIXES


def is_low_priority(row: dict[str, Any]) -> bool:
    return "Low Priority" in str(row.get("meterName") or "")


def rates_of_row(row: dict[str, Any]) -> list[Rate]:
    """Every hourly rate one catalogue row carries; none for Windows, Low Priority or DevTest rows. A row the
    catalogue cannot read raises ValueError naming the field."""
    if is_windows(row) or is_low_priority(row) or row.get("type") not in ("Consumption", "Reservation"):
        return []
    kind, sku, region = str(row.get("kind", "vm")), str(row["armSkuName"]), str(row.get("armRegionName") or "")
    source, as_of = str(row["source"]), date.fromisoformat(str(row["asOf"]))
    price = float(row["retailPrice"])
    answer = str(row["answer"]) if row.get("answer") else None
    end = row.get("effectiveEndDate")
    until = date.fromisoformat(str(end)[:10]) if end else None

    def rate(option: str, per_hour: float) -> Rate:
        return Rate(kind, sku, region, option, per_hour, source, as_of, answer=answer, until=until)

    if row["type"] == "Reservation":
        term = str(row.get("reservationTerm"))
        if term not in TERM_HOURS:
            raise ValueError(f"{sku} {region}: reservationTerm {term!r} is not one of {', '.join(TERM_HOURS)}")
        return [rate(f"reservation{_TERM_OPTION[term]}", price / TERM_HOURS[term])]
    unit = str(row.get("unitOfMeasure"))
    if unit not in UNIT_HOURS:
        raise ValueError(f"{sku} {region}: unitOfMeasure {unit!r} is not one of {', '.join(UNIT_HOURS)}")
    hours = UNIT_HOURS[unit]
    if str(row.get("meterName") or "").endswith(" Spot"):
        return [rate("spot", price / hours)]
    out = [rate("payg", price / hours)]
    for plan in row.get("savingsPlan") or []:
        term = str(plan.get("term"))
        if term not in TERM_HOURS:
            raise ValueError(f"{sku} {region}: savingsPlan term {term!r} is not one of {', '.join(TERM_HOURS)}")
        out.append(rate(f"savingsPlan{_TERM_OPTION[term]}", float(plan["retailPrice"]) / hours))
    return out


def catalogue_from_document(document: dict[str, Any]) -> PriceCatalogue:
    rates = tuple(r for row in document["rows"] for r in rates_of_row(row))
    unpriced = {(str(u["kind"]), str(u["armSkuName"])): str(u["reason"]) for u in document.get("unpriced", [])}
    return PriceCatalogue(rates, unpriced)


def catalogue_document() -> dict[str, Any]:
    return load_facts("prices.json")


@cache
def price_catalogue() -> PriceCatalogue:
    return catalogue_from_document(catalogue_document())


def rates_of_price_file(prices: PriceFile, name: str) -> tuple[Rate, ...]:
    """A stack's price file as rates: each marked as the file's, with its source and date."""
    return tuple(Rate(row.kind, row.sku, row.region, row.option,
                      row.usd_per_hour if row.usd_per_hour is not None else (row.usd_per_month or 0.0) / HOURS_PER_MONTH,
                      f"price file {name}: {prices.source}", prices.as_of, from_price_file=True)
                 for row in prices.rows)


def policy_rates(catalogue: PriceCatalogue) -> dict[str, dict[str, dict[str, float]]]:
    """The VM list rates the policy pack carries (policies/rules/vm_prices.json: the pack runs without components/):
    region -> size -> option (payg, spot) -> USD per hour."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for rate in sorted(catalogue.rates, key=lambda r: (r.region, r.sku, r.option)):
        if rate.kind == "vm" and rate.option in ("payg", "spot") and not rate.from_price_file:
            out.setdefault(rate.region, {}).setdefault(rate.sku, {})[rate.option] = rate.usd_per_hour
    return out
