"""Rebuild the price catalogue's VM rows from a saved Azure Retail Prices API answer.

    curl -s 'https://prices.azure.com/api/retail/prices?api-version=2023-01-01-preview&$filter=serviceName eq
      '"'"'Virtual Machines'"'"' and armRegionName eq '"'"'eastus2'"'"' and armSkuName eq '"'"'Standard_D4s_v5'"'"'' > page1.json
    python -m tools.refresh_prices --as-of 2026-11-26 --source 'prices.azure.com, <the query>' page1.json [page2.json ...]

Each file is one answer as the API returns it (`{"Items": [...], "NextPageLink": ...}`; follow NextPageLink and save
every page). Items are kept in the API's own fields; Windows rows (productName "... Windows"), Low Priority meters and
DevTestConsumption rows are dropped. A kept item replaces the catalogue's row of the same size, region, type, term and
meter (so a Spot row never replaces the pay-as-you-go one); every other row stays. The pack's copy of the VM rates
(policies/rules/vm_prices.json) is rewritten from the result. Nothing is fetched: the answer is saved by whoever runs
the query, and its date and query are the rows' as-of date and source.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import date
from pathlib import Path
from typing import Any

from components.catalog.prices import (
    catalogue_from_document,
    is_low_priority,
    is_windows,
    policy_rates,
    rates_of_row,
)

ROOT = Path(__file__).resolve().parent.parent
CATALOGUE = ROOT / "components" / "catalog" / "data" / "prices.json"
POLICY_COPY = ROOT / "policies" / "rules" / "vm_prices.json"
API_FIELDS = ("armSkuName", "armRegionName", "serviceName", "productName", "meterName", "type", "reservationTerm",
              "unitOfMeasure", "retailPrice", "savingsPlan", "effectiveStartDate")


def _key(row: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(row.get(k) or "") for k in ("kind", "armSkuName", "armRegionName", "type", "reservationTerm",
                                                  "meterName"))


def rows_of_answer(answer: Any, source: str, as_of: date) -> list[dict[str, Any]]:
    """The catalogue rows of one API answer: Linux Consumption and Reservation VM items, in the API's fields."""
    if not isinstance(answer, dict) or not isinstance(answer.get("Items"), list):
        raise ValueError('not a Retail Prices API answer: it has no "Items" list')
    rows = []
    for item in answer["Items"]:
        if not isinstance(item, dict) or item.get("serviceName") != "Virtual Machines":
            continue
        if is_windows(item) or is_low_priority(item) or item.get("type") not in ("Consumption", "Reservation"):
            continue
        row = {"kind": "vm", **{k: item.get(k) for k in API_FIELDS}, "source": source, "asOf": as_of.isoformat()}
        row["savingsPlan"] = row["savingsPlan"] or []
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
    rows = [row for path in answers for row in rows_of_answer(json.loads(path.read_text("utf-8")), source, as_of)]
    document = merged(json.loads(catalogue.read_text("utf-8")), rows)
    catalogue.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    rates = policy_rates(catalogue_from_document(document))
    policy_copy.write_text(json.dumps(rates, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return len(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("answers", nargs="+", type=Path, help="saved API answers (JSON), one per page")
    parser.add_argument("--source", required=True, help="where the answer came from: the query URL and who saved it")
    parser.add_argument("--as-of", required=True, type=date.fromisoformat, help="the day the answer was saved")
    args = parser.parse_args(argv)
    try:
        count = refresh(args.answers, args.source, args.as_of)
    except (OSError, ValueError, KeyError) as error:
        print(f"refresh_prices: {error}", file=sys.stderr)
        return 2
    print(f"{count} rows from {len(args.answers)} answers merged into {CATALOGUE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
