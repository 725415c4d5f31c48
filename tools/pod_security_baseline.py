"""Pod Security's baseline capability list, from k8s.io/pod-security-admission at the cluster's Kubernetes patch
release, into components/catalog/pod_security_baseline.json (the team-pod policy allows these and IPC_LOCK):

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

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "components" / "catalog" / "pod_security_baseline.json"
MODULE = "k8s.io/pod-security-admission"
FILE = "policy/check_capabilities_baseline.go"


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


def main() -> None:
    version = "v0." + KUBERNETES.split(".", 1)[1]  # the staging modules are v0.<minor>.<patch>
    source = (module_dir(version) / FILE).read_text()
    OUT.write_text(json.dumps({"source": f"{MODULE}@{version} {FILE}", "capabilities": baseline_capabilities(source)},
                              indent=1) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
