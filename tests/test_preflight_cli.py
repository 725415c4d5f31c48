"""The preflight in `gpucluster plan`: a plan Azure would refuse exits 2 with one line per problem and writes
nothing; what no source settles is a warning row in summary.json, the console summary and report.html."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def gpucluster(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "gpucluster.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_confidential_size_outside_its_regions_exits_2(tmp_path: Path) -> None:
    """Standard_NCC40ads_H100_v5 is offered in East US 2, Central US and West Europe only
    (Azure/az-cgpu-onboarding README): the dev stack moved to eastus must not plan."""
    stack = yaml.safe_load((ROOT / "stacks" / "Pulumi.dev.yaml").read_text())
    stack["config"]["gpucluster:cluster"]["location"] = "eastus"
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(yaml.safe_dump(stack))
    out = tmp_path / "out"
    result = gpucluster("plan", str(path), "--out", str(out), "--quiet")
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines == ["error: confidential-z3-00 sku.name: Standard_NCC40ads_H100_v5 is not offered in eastus; it is in "
                     "eastus2, centralus, westeurope (" + lines[0].split("(", 1)[1]]
    assert lines[0].endswith("[preflight rule size-region]") and "Traceback" not in result.stderr
    assert not out.exists()


def test_warnings_are_report_rows(tmp_path: Path) -> None:
    out = tmp_path / "dev"
    result = gpucluster("plan", "dev", "--out", str(out))
    assert result.returncode == 0, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    rows = summary["preflightWarnings"]
    assert {"rule": "size-zones-unknown", "resource": "confidential-z3-00", "field": "zones"} in [
        {k: r[k] for k in ("rule", "resource", "field")} for r in rows]
    assert "Azure preflight warnings" in result.stdout and "size-zones-unknown" in result.stdout
    assert "Azure preflight warnings" in (out / "report.html").read_text()
    preview = json.loads((out / "preview.json").read_text())
    account = next(s["newState"]["inputs"] for s in preview["steps"]
                   if s["newState"]["type"] == "azure-native:storage:StorageAccount")
    assert account["accountName"].isalnum() and account["accountName"].islower()


def test_check_runs_the_preflight_on_a_saved_preview(tmp_path: Path) -> None:
    """`gpucluster check --stack dev` on a preview of dev judges it against Azure's rules too: an NSG rule
    with a service tag in the plural field (ARM: SecurityRuleParameterContainsUnsupportedValue) exits 2."""
    out = tmp_path / "dev"
    assert gpucluster("plan", "dev", "--out", str(out), "--quiet").returncode == 0
    preview = json.loads((out / "preview.json").read_text())
    assert gpucluster("check", str(out / "preview.json"), "--stack", "dev").returncode == 0
    nsg = next(s for s in preview["steps"] if s["newState"]["type"] == "azure-native:network:NetworkSecurityGroup")
    rule = nsg["newState"]["inputs"]["securityRules"][0]
    rule.pop("sourceAddressPrefix", None)
    rule["sourceAddressPrefixes"] = ["VirtualNetwork"]
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(preview))
    result = gpucluster("check", str(broken), "--stack", "dev")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "preflight rule" in result.stderr and "Traceback" not in result.stderr
