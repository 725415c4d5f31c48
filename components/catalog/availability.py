"""Where each catalogued VM size is offered: regions, and zones where a public source settles them.

Each row names its source and the date the source states (or was last changed). Azure publishes no
machine-readable, subscription-independent list; the authority for one subscription is
`az vm list-skus --location <region> --size <size> --zone` (zones are logical and differ per subscription,
so no public page settles a size's zones: every row leaves them unknown and the plan warns).

A size placed in a region its row does not list fails the plan, naming the regions that do, when the row rests on
Microsoft's own word (docs, Azure's repositories, an API capture). A row no Microsoft source confirms is kept as the
claim it is: the plan neither refuses a region it leaves out nor vouches for one it lists, and warns either way. A
size without a row and unknown zones are warnings too. The price catalogue's saved Retail Prices API answers add
rows of their own (`priced_availability`): a size with a Linux pay-as-you-go meter in a region is sold there; those
rows confirm the regions they list and refuse none. A stack that has
confirmed availability itself (list-skus, a capacity reservation) declares it under
`cluster.sizeRegions.<size>` with its source; that row replaces the catalogue's.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.catalog.prices import Rate


@dataclass(frozen=True)
class Availability:
    size: str
    regions: tuple[str, ...]
    source: str
    as_of: str
    """The date the source states or was last changed (YYYY-MM or YYYY-MM-DD)."""
    primary: bool
    """From Microsoft (docs, Azure's own repositories, an API capture); False: unconfirmed, a claim the plan only
    reports (it refuses nothing on it)."""
    zones: dict[str, tuple[str, ...]] | None = None
    """Region -> zones offering the size, where a source settles it; None: not established."""
    exhaustive: bool = True
    """The source lists every region offering the size, so a region it leaves out is refused (when primary). False:
    it confirms the regions it lists and says nothing of others (a price answer of one region)."""


_ROWS: tuple[Availability, ...] = (
    Availability(
        "Standard_NCC40ads_H100_v5", ("eastus2", "centralus", "westeurope"),
        "Azure/az-cgpu-onboarding README.md (\"available in the East US 2, Central US, and West Europe regions\"), "
        "commit 51d392a1; the onboarding scripts accept eastus2, westeurope, centralus",
        "2026-04-23", primary=True),
    Availability(
        "Standard_ND96isr_H100_v5", ("eastus2", "westeurope", "southeastasia", "japaneast"),
        "unconfirmed: no Microsoft page or API capture found lists its regions (azure-compute-docs "
        "sizes/gpu-accelerated/ndh100v5-series.md and azure-docs ndv5-series.md give none). The only public list "
        "found is a third-party page, theneuralbase.com \"Azure: NDv5 / ND H100\" (\"as of April 2026, NDv5 is "
        "available in only 4 Azure regions (East US 2, West Europe, Southeast Asia, Japan East)\"), which also "
        "gives the InfiniBand as 200 Gbps where Microsoft's ndv5-series.md says 400 Gb/s per GPU: not to be relied on",
        "2026-04", primary=False),
)

_GB_QUOTE = ("unpublished: the series pages (azure-compute-docs sizes/gpu-accelerated/nd-gb300-v6-series.md, "
             "nd-gb200-v6-series.md) list no regions and Azure sells these racks by quote. A stack declares "
             "its region under cluster.sizeRegions.<size> with the quote or `az vm list-skus` output as source")
_ROWS += (
    Availability("Standard_ND128isr_GB300_v6", (), _GB_QUOTE, "2026-08", primary=False),
    Availability("Standard_ND128isrG5_GB300_v6", (), _GB_QUOTE, "2026-08", primary=False),
    Availability("Standard_ND128isr_NDR_GB200_v6", (), _GB_QUOTE, "2026-08", primary=False),
)

AVAILABILITY: dict[str, Availability] = {row.size: row for row in _ROWS}


def priced_availability(rates: tuple[Rate, ...]) -> dict[str, Availability]:
    """Where the price catalogue's own Retail Prices API answers sell a size: a Linux pay-as-you-go meter for a size
    in a region is Microsoft's word that the size is sold there (Azure publishes prices of what it sells), so such a
    row confirms the region. It says nothing of the regions its answers did not cover, so the row is not exhaustive:
    another region is a warning, never refused. Third-party price rows (no saved answer) confirm nothing."""
    found: dict[str, dict[str, Rate]] = {}
    for rate in rates:
        if rate.kind == "vm" and rate.option == "payg" and rate.region and rate.answer and not rate.from_price_file:
            found.setdefault(rate.sku, {}).setdefault(rate.region, rate)
    out = {}
    for size, by_region in sorted(found.items()):
        regions = tuple(sorted(by_region))
        source = "; ".join(f"{region}: a Linux pay-as-you-go meter in the Azure Retail Prices API answer saved as "
                           f"components/catalog/data/{by_region[region].answer}" for region in regions)
        as_of = max(by_region[region].as_of for region in regions).isoformat()
        out[size] = Availability(size, regions, source, as_of, primary=True, exhaustive=False)
    return out


def availability_rows(rates: tuple[Rate, ...]) -> dict[str, Availability]:
    """The catalogue's rows: a row from Microsoft's word first, then the price answers' evidence, then an
    unconfirmed claim."""
    rows = dict(AVAILABILITY)
    for size, row in priced_availability(rates).items():
        if size not in rows or not rows[size].primary:
            rows[size] = row
    return rows
