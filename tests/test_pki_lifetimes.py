"""docs/pki.md lists every certificate of the plan with its renewal path, and `pulumi preview` warns before
the certificates in state expire."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pulumi
import pulumi_tls as tls
import pytest

from gpucluster.azure.pki import warn_before_expiry
from gpucluster.offline.engine import ProgramRun
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.planning.pki_lifetimes import certificate_names, expiry_warning
from tests.support.stacks import ROOT, stack_spec

PKI_DOC = ROOT / "docs" / "pki.md"
COLUMNS = ["certificate", "lifetime", "issued by", "read by", "renewed on running machines", "warned before expiry"]
CERT_TYPES = ("tls:index/selfSignedCert:SelfSignedCert", "tls:index/locallySignedCert:LocallySignedCert")


def pki_table(text: str) -> dict[str, dict[str, str]]:
    """The rows of the table under "## Every certificate": certificate name -> column -> cell."""
    section = text.split("## Every certificate", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == COLUMNS, header
    rows = {}
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert len(cells) == len(COLUMNS), line
        name = cells[0].strip("`")
        assert name not in rows, f"{name} twice in docs/pki.md"
        rows[name] = dict(zip(COLUMNS, cells, strict=True))
    return rows


def _pattern(row: str) -> re.Pattern[str]:
    return re.compile(re.escape(row).replace(re.escape("<member>"), r"etcd(-events)?-\d+"))


def _plan_names(stack: str) -> tuple[str, ...]:
    plan = plan_cluster(stack_spec(stack))
    return certificate_names(plan.spec.name, plan.ip, plan.control_plane)


def _uncovered(names: tuple[str, ...], rows: dict[str, dict[str, str]]) -> list[str]:
    return [n for n in names if sum(bool(_pattern(r).fullmatch(n)) for r in rows) != 1]


def test_every_certificate_of_the_plan_has_one_row_with_a_renewal_path() -> None:
    rows = pki_table(PKI_DOC.read_text(encoding="utf-8"))
    names = _plan_names("dev") + _plan_names("prod")
    assert _uncovered(names, rows) == []
    assert [r for r in rows if not any(_pattern(r).fullmatch(n) for n in names)] == []  # no stale row
    for name, row in rows.items():
        assert all(row[c] for c in COLUMNS), name


def test_a_certificate_added_without_a_row_fails() -> None:
    """The check above is not vacuous: drop a row, or add a certificate, and it names it."""
    rows = pki_table(PKI_DOC.read_text(encoding="utf-8"))
    names = _plan_names("dev")
    assert _uncovered(names, {k: v for k, v in rows.items() if k != "<member>-peer"}) == [
        n for n in names if n.endswith("-peer")]
    assert _uncovered((*names, "etcd-metrics-client"), rows) == ["etcd-metrics-client"]


def test_every_certificate_the_program_declares_is_in_the_inventory(dev_run: ProgramRun) -> None:
    """A pulumi-tls certificate added anywhere in the program (not only to the certificate plan) needs a row."""
    declared = {r.name.removeprefix("dev-pki-") for r in dev_run.registrations if r.type in CERT_TYPES}
    assert declared and declared <= set(_plan_names("dev"))


def test_expiry_warnings() -> None:
    now = datetime(2026, 11, 23, tzinfo=UTC)
    assert expiry_warning("etcd-0-server", False, now + timedelta(days=31), now) is None
    assert "this `pulumi up` issues a new one" in (expiry_warning("etcd-0-server", False, now + timedelta(days=29), now)
                                                  or "")
    assert expiry_warning("ca", True, now + timedelta(days=800), now) is None
    assert "breaks every machine's trust" in (expiry_warning("ca", True, now + timedelta(days=700), now) or "")


class _Mocks(pulumi.runtime.Mocks):
    def __init__(self, end: datetime) -> None:
        self.end = end

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        return f"{args.name}-id", {**args.inputs, "validityEndTime": self.end.isoformat().replace("+00:00", "Z")}

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        return {}, None


@pytest.mark.parametrize(("days", "warned"), [(12, True), (200, False)])
def test_pulumi_preview_warns_for_a_certificate_in_state(monkeypatch: pytest.MonkeyPatch, days: int,
                                                        warned: bool) -> None:
    """The hook ClusterPki puts on every certificate: a pulumi-tls certificate whose `validityEndTime` (RFC 3339,
    pulumi-tls LocallySignedCert outputs) is 12 days away logs a warning through the engine; 200 days, none."""
    messages: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda text, resource=None, **_: messages.append(text))
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    pulumi.runtime.set_mocks(_Mocks(datetime.now(UTC) + timedelta(days=days)), preview=False)

    @pulumi.runtime.test
    def declare() -> pulumi.Output[str]:
        cert = tls.LocallySignedCert("etcd-0-server", cert_request_pem="csr", ca_private_key_pem="k",
                                     ca_cert_pem="c", validity_period_hours=8760, allowed_uses=["server_auth"])
        warn_before_expiry("etcd-0-server", False, cert)
        return cert.validity_end_time

    try:
        declare()
    finally:
        asyncio.set_event_loop(None)
        loop.close()
    assert bool(messages) == warned and all("etcd-0-server" in m for m in messages)


def test_the_doc_is_linked_from_operations() -> None:
    assert "docs/pki.md" in (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    assert Path(PKI_DOC).is_file()
