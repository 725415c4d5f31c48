"""Is each pinned consumer version the newest patch of its release line? Asked of the Go module proxy.

    python -m tools.pin_versions           # query the proxy, write components/catalog/facts/pin_versions.json, print a table
    python -m tools.pin_versions --check   # the same, then exit 1 if a pin is behind without a reason in REASONS

The pins are read from the code (components/catalog/versions.py, components/catalog/metrics.py, e2e/consumers.py),
never copied. A release line is a major and minor (v1.36.x); Prometheus' Go module spells 3.14.0 as v0.314.0. The
proxy's `@v/list` may name only some versions while still serving an exact version asked for, so besides the list
each line is probed version by version: the patch after the pin, then the next, until one is refused (then likewise
after the newest listed one), and the next lines' .0 releases the same way, to see the newest line. `go` runs
`go list -m -versions -json <module>` and `go list -m -json <module>@<version>` outside any module. A pin the proxy
cannot answer for (a module without semantic-version tags, tags the module path cannot carry, or a pinned version the
proxy refuses with nothing newer served) is "unchecked", with the reason and the proxy's answer.
tests/test_pin_versions.py holds the saved result against the pins in the code, offline.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from datetime import date
from pathlib import Path

from e2e.consumers import HELM, KWOK
from e2e.consumers import KUBERNETES as STACKS_KUBERNETES
from gpucluster.catalog.metrics import PROMETHEUS_VERSION
from gpucluster.catalog.versions import (
    CILIUM,
    DEFAULT_MINOR,
    DRA_DRIVER,
    DRANET,
    GPU_OPERATOR,
    KUBERNETES_RELEASES,
    KUEUE,
    MINOR_COUPLED,
    Component,
)
from tools.facts_home import FACTS, generator_of, write_facts

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = FACTS / "pin_versions.json"
SOURCE = "the Go module proxy, through `go list -m` (each pin's `module`)"
MAX_PROBES = 50
"""Probing stops at the first refusal; this only bounds a proxy that never refuses."""

_SOURCES_AT_NEWER_PATCHES = (
    "the consumer catalogues (components/catalog/facts/consumers/, tools/extract_consumer_facts.py) are read from git "
    "mirrors of the upstream repositories at the pinned tag, and the newer patches' sources are not readable that way "
    "here: {why}. A move re-reads the catalogues at the new tag first (docs/consumer-checks.md), then the pins move together")
REASONS: dict[str, str] = {
    "kubernetes-stacks": _SOURCES_AT_NEWER_PATCHES.format(
        why="kubernetes/kubernetes is over the mirror size limit (1.9 GB), so kubelet's, kubeadm's and the API "
            "server's flags and configuration fields stay read at the 1.36 tags docs/consumer-checks.md names"),
    **{f"etcd-{minor}": _SOURCES_AT_NEWER_PATCHES.format(
        why="the etcd-io/etcd mirror's newest 3.6 tag is v3.6.14, so etcd's and etcdctl's flags cannot be re-read at "
            "v3.6.15 or v3.6.16") for minor in MINOR_COUPLED},
    **{f"coredns-{minor}": (
        "the pin is the CoreDNS the minor's own kubeadm pins (its constants' CoreDNSVersion; components/catalog/"
        "in_cluster.py coredns_image: 'CoreDNS as the minor's kubeadm release pins it'; components/catalog/versions.py "
        "MinorCoupled), not the newest CoreDNS patch") for minor in MINOR_COUPLED},
}
"""Why a pin stays behind the newest patch of its line (key: the pin's name). Each is a reason the project states
(docs/ or the code), never a guess; a pin behind without one fails `--check` and tests/test_pin_versions.py."""

_UNSERVABLE = {
    "cluster-autoscaler": (
        "kubernetes/autoscaler tags releases cluster-autoscaler-<version>, not cluster-autoscaler/v<version>, so the "
        "module k8s.io/autoscaler/cluster-autoscaler has no semantic-version tags (e2e/consumers.py NOT_BUILT)"),
    "gpu-operator": (
        "NVIDIA/gpu-operator's go.mod names the module github.com/NVIDIA/gpu-operator (no /v26 suffix), so its v26.x "
        "tags are not versions of that module: the proxy lists none and serves it at pseudo-versions only"),
    "nvidia-dra-driver-gpu": (
        "kubernetes-sigs/dra-driver-nvidia-gpu's go.mod names the module sigs.k8s.io/dra-driver-nvidia-gpu (no /v25 "
        "suffix), so its v25.x tags are not versions of that module"),
}
"""Why the module proxy cannot answer for a component (key: the component's key), quoted when it refuses."""

_REFUSAL = re.compile(r"403 Forbidden|404 Not Found|410 Gone|not available|not found|unknown revision|invalid version"
                      r"|no matching versions", re.IGNORECASE)
_SEMVER = re.compile(r"^v(\d+)\.(\d+)\.(\d+)$")


# Versions and lines ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Version:
    """A released module version vMAJOR.MINOR.PATCH (pre-releases and pseudo-versions are not releases)."""

    major: int
    minor: int
    patch: int

    @staticmethod
    def parse(text: str) -> Version | None:
        match = _SEMVER.match(text)
        return Version(*(int(g) for g in match.groups())) if match else None

    @property
    def line(self) -> tuple[int, int]:
        return (self.major, self.minor)

    def next_patch(self) -> Version:
        return Version(self.major, self.minor, self.patch + 1)

    def next_line(self) -> Version:
        return Version(self.major, self.minor + 1, 0)

    def __str__(self) -> str:
        return f"v{self.major}.{self.minor}.{self.patch}"


def line_label(line: tuple[int, int]) -> str:
    return f"v{line[0]}.{line[1]}"


def releases(texts: Iterable[str]) -> list[Version]:
    """The released versions among `texts`, oldest first."""
    return sorted(v for v in (Version.parse(t) for t in texts) if v is not None)


def on_line(versions: Iterable[Version], line: tuple[int, int]) -> list[Version]:
    return [v for v in versions if v.line == line]


# Asking the proxy ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    versions: tuple[str, ...] = ()
    """The module's version list, or the one version asked for when the proxy serves it."""
    refusal: str = ""
    """The proxy's words when it refused ('' when it answered)."""
    time: str = ""
    """The version's time (its `.info` Time) when one exact version was asked for."""


Query = Callable[[str], Answer]
"""`query("module")` lists the module's versions; `query("module@version")` asks for one exact version."""


class ProxyError(RuntimeError):
    """`go` failed other than by the proxy refusing (no network, no go): nothing may be concluded."""


def _go(args: list[str]) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as outside:
        try:
            return subprocess.run(["go", *args], cwd=outside, capture_output=True, text=True, timeout=180, check=False,
                                  env=_go_env())
        except (OSError, subprocess.TimeoutExpired) as error:
            raise ProxyError(f"go {' '.join(args)}: {error}") from error


def _go_env() -> dict[str, str]:
    return {**os.environ, "GO111MODULE": "on", "GOWORK": "off"}


def refusal_text(stderr: str) -> str:
    """The proxy's refusal in one line (its status and server response), or '' when `stderr` is not a refusal."""
    if not _REFUSAL.search(stderr):
        return ""
    status = re.search(r"(\d{3} [A-Z][A-Za-z ]+)", stderr)
    response = re.search(r"server response:\s*(.+)", stderr)
    parts = [p.group(1).strip() for p in (status, response) if p]
    return " ".join(parts) or stderr.strip().splitlines()[-1]


def go_query(target: str) -> Answer:
    """Ask the module proxy through `go list -m` (see Query)."""
    listing = "@" not in target
    done = _go(["list", "-m", "-json", *(["-versions"] if listing else []), target])
    if done.returncode != 0:
        refusal = refusal_text(done.stderr)
        if not refusal:
            raise ProxyError(f"go list -m {target}: {done.stderr.strip()}")
        return Answer(refusal=refusal)
    info = json.loads(done.stdout)
    if listing:
        return Answer(tuple(info.get("Versions") or ()))
    asked = target.rsplit("@", 1)[1]
    got = str(info.get("Version", ""))
    if got != asked:
        return Answer(refusal=f"answered {got or 'nothing'} for {asked}")
    return Answer((got,), time=str(info.get("Time", "")))


def served(query: Query, module: str, version: Version) -> bool:
    return not query(f"{module}@{version}").refusal


def _probe(query: Query, module: str, after: Version, step: Callable[[Version], Version]) -> list[Version]:
    """The versions after `after`, one `step` at a time, that the proxy serves, until the first refusal."""
    found: list[Version] = []
    candidate = step(after)
    while len(found) < MAX_PROBES and served(query, module, candidate):
        found.append(candidate)
        candidate = step(candidate)
    return found


def probe_patches(query: Query, module: str, after: Version) -> list[Version]:
    """The patches after `after` on its line that the proxy serves, asked one by one until the first refusal."""
    return _probe(query, module, after, Version.next_patch)


def probe_lines(query: Query, module: str, after: Version) -> list[Version]:
    """The .0 releases of the lines after `after`'s that the proxy serves, until the first refusal."""
    return _probe(query, module, after, Version.next_line)


def scan_line(query: Query, module: str, start: Version, listed: Iterable[Version]) -> list[Version]:
    """The versions of `start`'s line the proxy served other than `start`: the listed ones, the patches after `start`
    probed one by one until the first refusal, and likewise the patches after the newest of those."""
    seen = {*on_line(listed, start.line), *probe_patches(query, module, start)}
    newest = max(seen, default=start)
    if newest > start:
        seen |= set(probe_patches(query, module, newest))
    return sorted(seen - {start})


def newest_line(query: Query, module: str, start: Version, known: list[Version]) -> list[Version]:
    """The versions seen on the newest line: from `known` (listed or served) and the .0 releases of the lines after
    `start`'s probed until the first refusal (then after the newest known line's, likewise), with the newest line's
    patches probed too. Empty when the proxy served nothing."""
    pool = sorted({*known, *probe_lines(query, module, start)})
    if pool and pool[-1].line > start.line:
        pool = sorted({*pool, *probe_lines(query, module, pool[-1])})
    if not pool:
        return []
    top = max(on_line(pool, pool[-1].line))
    return sorted({*on_line(pool, top.line), top, *scan_line(query, module, top, pool)})


# Pins -------------------------------------------------------------------------------------------------------------


def default_module_version(pinned: str) -> str:
    return f"v{pinned.removeprefix('v')}"


def prometheus_module_version(pinned: str) -> str:
    """Prometheus' Go module versions are v0.<major*100+minor>.<patch>: v3.14.0 is v0.314.0."""
    major, minor, patch = (int(p) for p in pinned.removeprefix("v").split("."))
    return f"v0.{major * 100 + minor}.{patch}"


@dataclass(frozen=True)
class Pin:
    name: str
    module: str
    pinned: str
    """As the code spells it."""
    where: str
    module_version: str
    """The pin as a version of `module`."""
    unservable: str = ""
    """Why the proxy cannot answer for it ('' when it should)."""


def _pin(name: str, module: str, pinned: str, where: str, key: str = "",
         to_module: Callable[[str], str] = default_module_version) -> Pin:
    return Pin(name, module, pinned, where, to_module(pinned), _UNSERVABLE.get(key or name, ""))


def _kubernetes_pins() -> list[Pin]:
    return [_pin("kubernetes-stacks", "k8s.io/kubernetes", STACKS_KUBERNETES,
                 "stacks/Pulumi.*.yaml cluster.kubernetesVersion (e2e/consumers.py KUBERNETES)"),
            *_table_pins()]


def _table_pins() -> list[Pin]:
    return [_pin(f"kubernetes-{minor}", "k8s.io/kubernetes", release.latest_patch,
                 f"components/catalog/versions.py KUBERNETES_RELEASES[{minor!r}].latest_patch"
                 + (" (DEFAULT_MINOR)" if minor == DEFAULT_MINOR else ""))
            for minor, release in KUBERNETES_RELEASES.items()]


_COUPLED_MODULES = {
    "etcd": "go.etcd.io/etcd/server/v3",
    "coredns": "github.com/coredns/coredns",
    "cluster-autoscaler": "k8s.io/autoscaler/cluster-autoscaler",
    "cloud-controller-manager": "sigs.k8s.io/cloud-provider-azure",
}


def _coupled_pins() -> list[Pin]:
    return [_pin(f"{component.key}-{minor}", _COUPLED_MODULES[component.key], component.version,
                 f"components/catalog/versions.py MINOR_COUPLED[{minor!r}].{component.key.replace('-', '_')}",
                 component.key)
            for minor, coupled in MINOR_COUPLED.items() for component in coupled.components]


_ADDON_MODULES = {
    KUEUE.key: "sigs.k8s.io/kueue",
    CILIUM.key: "github.com/cilium/cilium",
    GPU_OPERATOR.key: "github.com/NVIDIA/gpu-operator",
    DRA_DRIVER.key: "sigs.k8s.io/dra-driver-nvidia-gpu",
    DRANET.key: "sigs.k8s.io/dranet",
}


def _addon_pin(component: Component, constant: str) -> Pin:
    return _pin(component.key, _ADDON_MODULES[component.key], component.version,
                f"components/catalog/versions.py {constant}")


def pins() -> list[Pin]:
    """Every pinned consumer version the proxy is asked about, read from the code."""
    return [
        *_kubernetes_pins(), *_coupled_pins(),
        _addon_pin(KUEUE, "KUEUE"), _addon_pin(CILIUM, "CILIUM"), _addon_pin(GPU_OPERATOR, "GPU_OPERATOR"),
        _addon_pin(DRA_DRIVER, "DRA_DRIVER"), _addon_pin(DRANET, "DRANET"),
        _pin("prometheus", "github.com/prometheus/prometheus", PROMETHEUS_VERSION,
             "components/catalog/metrics.py PROMETHEUS_VERSION", to_module=prometheus_module_version),
        _pin("kwok", "sigs.k8s.io/kwok", KWOK, "e2e/consumers.py KWOK"),
        _pin("helm", "helm.sh/helm/v4", HELM, "e2e/consumers.py HELM"),
    ]


# Results ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    name: str
    module: str
    pinned: str
    where: str
    module_version: str
    checked: str
    status: str
    """"current", "behind" or "unchecked"."""
    pin_served: bool = False
    """Whether the proxy serves the pinned version itself."""
    newest_patch: str = ""
    """The newest version on the pin's line the proxy served ('' when none)."""
    newest_patch_time: str = ""
    newer: list[str] = field(default_factory=list)
    """The versions on the pin's line newer than the pin."""
    newest_line: str = ""
    newest_seen: str = ""
    """The newest version seen on the newest line."""
    reason: str = ""
    """Why it stays behind (REASONS), or why it could not be checked."""


def check(pin: Pin, query: Query, checked: str, reasons: dict[str, str] | None = None) -> Result:
    """Where `pin` stands on its line, and which lines the proxy serves past it."""
    base = Result(pin.name, pin.module, pin.pinned, pin.where, pin.module_version, checked, "unchecked")
    pinned = Version.parse(pin.module_version)
    if pinned is None:
        return replace(base, reason=f"{pin.module_version} is not a released version (vMAJOR.MINOR.PATCH)")
    refusal = query(f"{pin.module}@{pin.module_version}").refusal
    listed = releases(query(pin.module).versions)
    others = scan_line(query, pin.module, pinned, listed)
    line: list[Version] = others if refusal else sorted({*others, pinned})
    newer = [v for v in others if v > pinned]
    top = newest_line(query, pin.module, pinned, [*listed, *line])
    base = replace(base, pin_served=not refusal, newer=[str(v) for v in newer],
                   newest_line=line_label(top[-1].line) if top else "", newest_seen=str(top[-1]) if top else "")
    if line:
        base = replace(base, newest_patch=str(line[-1]), newest_patch_time=query(f"{pin.module}@{line[-1]}").time)
    if newer:
        return replace(base, status="behind", reason=(reasons or {}).get(pin.name, ""))
    if not refusal:
        return replace(base, status="current")
    why = pin.unservable or ("the proxy refuses the pinned version itself and serves no newer one on its line, so its "
                             "refusals say nothing about newer patches")
    return replace(base, reason=f"cannot be checked from the module proxy: {why}; the proxy answered "
                                f"{pin.module}@{pin.module_version}: {refusal}")


def unexplained(results: Iterable[Result]) -> list[str]:
    """The pins behind their line's newest patch with no reason recorded."""
    return [r.name for r in results if r.status == "behind" and not r.reason]


def _span(versions: list[str]) -> str:
    return "-" if not versions else versions[0] if len(versions) == 1 else f"{versions[0]}..{versions[-1]}"


def _status(result: Result) -> str:
    if result.status == "behind":
        return "behind (reason)" if result.reason else "behind"
    return result.status


def table(results: Iterable[Result]) -> str:
    rows = [("pin", "pinned", "as module", "status", "newer on its line", "newest line (newest)")]
    rows += [(r.name, r.pinned, r.module_version, _status(r), _span(r.newer),
              f"{r.newest_line} ({r.newest_seen})" if r.newest_line else "-") for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def write(results: list[Result], path: Path = OUTPUT) -> None:
    write_facts(path, generator_of(__file__), {"source": SOURCE, "pins": [asdict(r) for r in results]}, indent=1)


def load(path: Path = OUTPUT) -> list[Result]:
    return [Result(**entry) for entry in json.loads(path.read_text(encoding="utf-8"))["pins"]]


def today() -> str:
    """Today as `date` prints it (the machine's clock, in UTC)."""
    done = subprocess.run(["date", "-u", "+%Y-%m-%d"], capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else date.today().isoformat()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Is each pinned consumer version the newest patch of its line?")
    parser.add_argument("--check", action="store_true", help="exit 1 if a pin is behind without a recorded reason")
    args = parser.parse_args(argv)
    query = functools.cache(go_query)
    checked = today()
    results = [check(pin, query, checked, REASONS) for pin in pins()]
    write(results)
    print(table(results))
    print(f"written: {OUTPUT.relative_to(ROOT)} (each entry's reason there)")
    missing = unexplained(results)
    if args.check and missing:
        print(f"behind without a reason in tools/pin_versions.py REASONS: {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
