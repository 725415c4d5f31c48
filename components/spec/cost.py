"""`cluster.cost` and a pool's `pricing`: how the plan prices the cluster (docs/cost.md), and the user's price file."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from gpucluster.errors import SpecError
from gpucluster.input_files import MIB, read_bounded
from gpucluster.spec.base import RealNumber, SpecModel, WholeNumber
from gpucluster.spec.errors import problems_from
from gpucluster.spec.yaml_text import load_yaml

PricingOption = Literal["payg", "spot", "reservation1y", "reservation3y", "savingsPlan1y", "savingsPlan3y"]
PriceKind = Literal["vm", "natGateway", "publicIp", "publicIpPrefixAddress", "loadBalancer", "registry", "disk",
                    "snapshotStorage", "privateEndpoint", "acrAgentPool"]
PRICE_FILE_KEY = "cluster.cost.priceFile"
MAX_PRICE_FILE_BYTES = MIB


class CostSpec(SpecModel):
    price_file: str | None = Field(default=None, min_length=1, max_length=500, pattern=r"^[^\x00]*\.(ya?ml|json)$")
    """A file of negotiated, reserved or quoted prices (relative to the project folder, YAML or JSON): its rows
    override or extend the catalogue's list prices and are marked as such (docs/cost.md, "A price file")."""
    max_price_age_days: WholeNumber = Field(default=180, ge=1, le=3650)
    """The plan warns when a price it uses was read longer ago than this."""

    @field_validator("price_file")
    @classmethod
    def _inside_the_project(cls, name: str | None) -> str | None:
        if name is not None and (Path(name).is_absolute() or ".." in Path(name).parts or "\\" in name):
            raise ValueError(f"{name!r} must be a path inside the project folder, relative to it "
                             "(e.g. prices/negotiated.yaml)")
        return name


class PriceFileRow(SpecModel):
    kind: PriceKind = "vm"
    sku: str = Field(min_length=1, max_length=100)
    """A VM size (`Standard_ND128isr_GB300_v6`), `Standard` for network kinds, `Premium` for the registry,
    `<storage account type> <GiB> GiB` for a disk, a storage SKU (`Standard_ZRS`) for snapshot storage."""
    region: str = Field(default="", pattern=r"^[a-z0-9]{0,40}$")
    """The region the price holds in; empty: every region."""
    option: PricingOption = "payg"
    usd_per_hour: RealNumber | None = Field(default=None, ge=0, le=100_000)
    usd_per_month: RealNumber | None = Field(default=None, ge=0, le=100_000_000)
    """Per 730-hour month (per GB-month for snapshot storage); give this or usdPerHour."""

    @model_validator(mode="after")
    def _one_price(self) -> PriceFileRow:
        if (self.usd_per_hour is None) == (self.usd_per_month is None):
            raise ValueError("give exactly one of usdPerHour and usdPerMonth")
        return self


class PriceFile(SpecModel):
    source: str = Field(min_length=3, max_length=2000)
    """Whose prices these are: the agreement, reservation order or quote, e.g. `EA price sheet 2026-11`."""
    as_of: date
    rows: list[PriceFileRow] = Field(min_length=1, max_length=1000)

    @field_validator("rows")
    @classmethod
    def _one_price_each(cls, rows: list[PriceFileRow]) -> list[PriceFileRow]:
        """Two rows for one kind, SKU, region and option would price it by their order: refused."""
        seen: dict[tuple[str, str, str, str], int] = {}
        for index, row in enumerate(rows):
            key = (row.kind, row.sku, row.region, row.option)
            if key in seen:
                raise ValueError(f"rows[{seen[key]}] and rows[{index}] both price {row.kind} {row.sku} "
                                 f"({row.option}{', ' + row.region if row.region else ', every region'}): keep one")
            seen[key] = index
        return rows

    @field_validator("as_of", mode="before")
    @classmethod
    def _day(cls, value: object) -> object:
        """A YAML date reaches us as Pulumi's reader renders it (Go's time format): keep its day when it is one."""
        if isinstance(value, str) and value.endswith(" 00:00:00 +0000 UTC"):
            return value.removesuffix(" 00:00:00 +0000 UTC")
        return value


def read_price_file(name: str, root: Path) -> PriceFile:
    """The stack's price file, read from the project folder; every problem one line naming the key and the file."""
    path = root / name
    where = f"{PRICE_FILE_KEY} ({name})"
    try:
        document = load_yaml(read_bounded(path, MAX_PRICE_FILE_BYTES, "price file"), where)
    except SpecError as error:
        raise SpecError.at(PRICE_FILE_KEY, "; ".join(f"{name}: {p.message}" if p.path == str(path) else str(p)
                                                     for p in error.problems)) from None
    if not isinstance(document, dict):
        raise SpecError.at(PRICE_FILE_KEY, f"{name} must be a mapping with source, asOf and rows (docs/cost.md)")
    try:
        return PriceFile.model_validate(document)
    except ValidationError as error:
        raise SpecError(problems_from(error, PriceFile, root=where)) from None
