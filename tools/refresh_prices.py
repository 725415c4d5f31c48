"""Rebuild the price catalogue's rows from saved Azure Retail Prices API answers.

    curl -s 'https://prices.azure.com/api/retail/prices?api-version=2023-01-01-preview&$filter=serviceName eq
      '"'"'Virtual Machines'"'"' and armRegionName eq '"'"'eastus2'"'"' and armSkuName eq '"'"'Standard_D4s_v5'"'"'' > page1.json
    python -m tools.refresh_prices --as-of 2026-11-26 --source 'prices.azure.com, <the query>' page1.json [page2.json ...]
    python -m tools.refresh_prices --manifest components/catalog/data/price_answers/answers.json

Each file is one answer as the API returns it (`{"Items": [...], "NextPageLink": ...}`; follow NextPageLink and save
every page). Items are kept in the API's own fields; Windows rows (productName "... Windows"), Low Priority meters and
DevTestConsumption rows are dropped. Besides "Virtual Machines" items, the meters the plan prices are kept: Standard
public IPs and public IP prefix addresses ("Virtual Network"), a registry's daily unit ("Container Registry") and
Premium SSD managed disks by tier ("Storage"; the tier's size from azure-docs
includes/disk-storage-premium-ssd-sizes.md). A kept item replaces the catalogue's row of the same kind, SKU, region,
type, term and meter (so a Spot row never replaces the pay-as-you-go one); every other row stays. The catalogue is
components/catalog/facts/prices.json; the policy pack's copy of its VM rates (policies/rules/vm_prices.json, beside the
rules because the pack runs without components/) is rewritten from the result. Nothing is fetched: the answer is saved by
whoever runs the query, and its date and query are the rows' as-of date and source. `--manifest` reads the answers
committed under components/catalog/data/price_answers/ with each one's source and date (answers.json there).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from gpucluster.catalog.prices import (
    catalogue_from_document,
    is_low_priority,
    is_windows,
    policy_rates,
    rates_of_row,
)
from tools.facts_home import FACTS, generator_of, with_generator

ROOT = Path(__file__).resolve().parent.parent
CATALOGUE = FACTS / "prices.json"
ANSWERS = ROOT / "components" / "catalog" / "data" / "price_answers"
POLICY_COPY = ROOT / "policies" / "rules" / "vm_prices.json"
API_FIELDS = ("armSkuName", "armRegionName", "serviceName", "productName", "meterName", "type", "reservationTerm",
              "unitOfMeasure", "retailPrice", "savingsPlan", "effectiveStartDate")
PREMIUM_SSD_GIB = {"P1": 4, "P2": 8, "P3": 16, "P4": 32, "P6": 64, "P10": 128, "P15": 256, "P20": 512, "P30": 1024,
                   "P40": 2048, "P50": 4096, "P60": 8192, "P70": 16384, "P80": 32767}
"""Premium SSD tiers' sizes in GiB: MicrosoftDocs/azure-docs includes/disk-storage-premium-ssd-sizes.md (commit
1d25717f). A disk is billed at the tier its size rounds up to; the plan's disks are the tiers' exact sizes."""
_DISK_METER = re.compile(r"^(P\d+) (LRS|ZRS) Disk$")
_REGISTRY_METER = re.compile(r"^(Basic|Standard|Premium) Registry Unit$")


def _key(row: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(row.get(k) or "") for k in ("kind", "armSkuName", "armRegionName", "type", "reservationTerm",
                                                  "meterName"))


def kind_and_sku(item: dict[str, Any]) -> tuple[str, str] | None:
    """What the catalogue calls an API item (its kind and SKU), or None for a meter the plan does not price."""
    service, product, meter = (str(item.get(k) or "") for k in ("serviceName", "productName", "meterName"))
    if service == "Virtual Machines":
        return "vm", str(item["armSkuName"])
    if service == "Virtual Network" and product == "IP Addresses" and meter == "Standard IPv4 Static Public IP":
        return "publicIp", "Standard"
    if service == "Virtual Network" and product == "Public IP Prefix" and meter == "Standard Static IP Addresses":
        return "publicIpPrefixAddress", "Standard"
    if service == "Container Registry" and (match := _REGISTRY_METER.match(meter)):
        return "registry", match[1]
    if service == "Storage" and product == "Premium SSD Managed Disks" and (match := _DISK_METER.match(meter)):
        return "disk", f"Premium_{match[2]} {PREMIUM_SSD_GIB[match[1]]} GiB"
    return None


def rows_of_answer(answer: Any, source: str, as_of: date, saved_as: str | None = None) -> list[dict[str, Any]]:
    """The catalogue rows of one API answer: Linux Consumption and Reservation items of the meters the plan prices,
    in the API's fields (a non-VM row's armSkuName is the catalogue's SKU: the API leaves it empty there). `saved_as`
    names the answer's file under the catalogue's folder when it is committed there (the row's `answer`)."""
    if not isinstance(answer, dict) or not isinstance(answer.get("Items"), list):
        raise ValueError('not a Retail Prices API answer: it has no "Items" list')
    rows = []
    for item in answer["Items"]:
        if not isinstance(item, dict) or (named := kind_and_sku(item)) is None:
            continue
        if is_windows(item) or is_low_priority(item) or item.get("type") not in ("Consumption", "Reservation"):
            continue
        kind, sku = named
        row = {"kind": kind, **{k: item.get(k) for k in API_FIELDS}, "armSkuName": sku, "source": source,
               "asOf": as_of.isoformat(), "answer": saved_as}
        row["savingsPlan"] = row["savingsPlan"] or []
        if item.get("effectiveEndDate"):  # a Spot meter's price holds for its month only
            row["effectiveEndDate"] = item["effectiveEndDate"]
        rates_of_row(row)  # refuses a row the catalogue could not read (unknown unit or term)
        rows.append(row)
    return rows


def merged(document: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    by_key = {_key(r): r for r in document["rows"]}
    by_key.update({_key(r): r for r in rows})
    order = sorted(by_key.values(), key=lambda r: (r.get("kind", "vm") != "vm", r.get("kind", "vm"), *_key(r)[1:]))
    return {**document, "rows": order}


def refresh(answers: list[Path], source: str, as_of: date, catalogue: Path = CATALOGUE,
            policy_copy: Path = POLICY_COPY) -> int:
    """Merge the answers into the catalogue file; returns how many rows they gave."""
    return refresh_many([Answer(path, source, as_of) for path in answers], catalogue, policy_copy)


@dataclass(frozen=True)
class Answer:
    path: Path
    source: str
    as_of: date
    saved_as: str | None = None
    """The answer's path under components/catalog/data/ when it is committed there."""


def manifest_answers(manifest: Path) -> list[Answer]:
    """answers.json: [{"file", "source", "asOf"}], files relative to the manifest's folder."""
    entries = json.loads(manifest.read_text("utf-8"))
    return [Answer(manifest.parent / e["file"], e["source"], date.fromisoformat(e["asOf"]),
                   f"{manifest.parent.name}/{e['file']}") for e in entries]


def refresh_many(answers: list[Answer], catalogue: Path = CATALOGUE, policy_copy: Path = POLICY_COPY) -> int:
    rows = [row for a in answers
            for row in rows_of_answer(json.loads(a.path.read_text("utf-8")), a.source, a.as_of, a.saved_as)]
    document = with_generator(generator_of(__file__), merged(json.loads(catalogue.read_text("utf-8")), rows))
    catalogue.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    rates = policy_rates(catalogue_from_document(document))
    policy_copy.write_text(json.dumps(rates, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return len(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("answers", nargs="*", type=Path, help="saved API answers (JSON), one per page")
    parser.add_argument("--source", help="where the answer came from: the query URL and who saved it")
    parser.add_argument("--as-of", type=date.fromisoformat, help="the day the answer was saved")
    parser.add_argument("--manifest", type=Path, help="answers.json listing saved answers with source and date")
    args = parser.parse_args(argv)
    if args.manifest is None and not (args.answers and args.source and args.as_of):
        parser.error("give answers with --source and --as-of, or --manifest")
    try:
        answers = manifest_answers(args.manifest) if args.manifest else \
            [Answer(path, args.source, args.as_of) for path in args.answers]
        count = refresh_many(answers)
    except (OSError, ValueError, KeyError) as error:
        print(f"refresh_prices: {error}", file=sys.stderr)
        return 2
    print(f"{count} rows from {len(answers)} answers merged into {CATALOGUE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
