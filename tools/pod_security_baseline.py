"""Pod Security baseline's allowed values, from k8s.io/pod-security-admission at the cluster's Kubernetes patch
release, into components/catalog/facts/pod_security_baseline.json: the capability list (the team-pod policy allows these
and IPC_LOCK), and the newest version's SELinux types and safe sysctls (the policy takes those checks as they are):

    python -m tools.pod_security_baseline

The module is read from the Go module cache (`go mod download` of the version e2e/consumers/kubernetes pins), the
way kube-apiserver's own build gets it from the module proxy.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from e2e.consumers import KUBERNETES
from tools.facts_home import FACTS, generator_of, write_facts

ROOT = Path(__file__).resolve().parent.parent
OUT = FACTS / "pod_security_baseline.json"
MODULE = "k8s.io/pod-security-admission"
FILE = "policy/check_capabilities_baseline.go"
SELINUX = "policy/check_seLinuxOptions.go"
SYSCTLS = "policy/check_sysctls.go"


def module_dir(version: str) -> Path:
    found = subprocess.run(["go", "mod", "download", "-json", f"{MODULE}@{version}"], capture_output=True, text=True,
                           check=True, cwd=ROOT / "e2e" / "consumers" / "kubernetes")
    return Path(json.loads(found.stdout)["Dir"])


def baseline_capabilities(source: str) -> list[str]:
    """The strings of `capabilities_allowed_1_0 = sets.NewString(...)`."""
    block = re.search(r"capabilities_allowed_1_0\s*=\s*sets\.New\w*\((.*?)\)", source, re.S)
    if not block:
        raise SystemExit(f"{FILE}: capabilities_allowed_1_0 not found")
    return re.findall(r'"([A-Z_]+)"', block.group(1))


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", name))


def selinux_types(source: str) -> list[str]:
    """The newest `selinuxAllowedTypes<major>_<minor> = sets.New(...)`: the set the check applies at our release."""
    sets = dict(re.findall(r"(selinuxAllowedTypes\d+_\d+)\s*=\s*sets\.New\w*\((.*?)\)", source, re.S))
    if not sets:
        raise SystemExit(f"{SELINUX}: selinuxAllowedTypes not found")
    return re.findall(r'"([a-z_]*)"', sets[max(sets, key=_version_key)])


def safe_sysctls(source: str) -> list[str]:
    """Every `sysctlsAllowedV1Dot<minor>` set: each adds to the one before (`.Union`), the newest holds them all."""
    blocks = re.findall(r"sysctlsAllowedV1Dot\d+\s*=\s*(?:sysctlsAllowedV1Dot\d+\.Union\()?sets\.NewString\((.*?)\)",
                        source, re.S)
    if not blocks:
        raise SystemExit(f"{SYSCTLS}: sysctlsAllowedV1Dot* not found")
    return sorted({name for block in blocks for name in re.findall(r'"([a-z0-9_.]+)"', block)})


def main() -> None:
    version = "v0." + KUBERNETES.split(".", 1)[1]  # the staging modules are v0.<minor>.<patch>
    root = module_dir(version)
    write_facts(OUT, generator_of(__file__), {
        "source": f"{MODULE}@{version} {FILE}, {SELINUX}, {SYSCTLS}",
        "capabilities": baseline_capabilities((root / FILE).read_text()),
        "selinuxTypes": selinux_types((root / SELINUX).read_text()),
        "sysctls": safe_sysctls((root / SYSCTLS).read_text())}, indent=1)
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
