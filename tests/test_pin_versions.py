"""tools/pin_versions.py: its saved answer (components/catalog/facts/pin_versions.json) held against the pins in the
code, offline, and its version-line logic against a fake module proxy."""

from __future__ import annotations

import re

from tools.pin_versions import (
    REASONS,
    Answer,
    Pin,
    Query,
    Version,
    check,
    load,
    on_line,
    pins,
    probe_patches,
    prometheus_module_version,
    refusal_text,
    releases,
    unexplained,
)

RERUN = ("re-run `python -m tools.pin_versions` (it asks the Go module proxy) and keep "
         "components/catalog/facts/pin_versions.json")
REFUSED = Answer(refusal="403 Forbidden This module version is not available.")


def test_every_pin_in_the_code_has_an_entry() -> None:
    assert sorted(p.name for p in pins()) == sorted(r.name for r in load()), RERUN


def test_each_entry_is_the_pin_in_the_code() -> None:
    code = {p.name: (p.pinned, p.module, p.module_version) for p in pins()}
    stale = {r.name: (r.pinned, r.module, r.module_version) for r in load()
             if code.get(r.name) != (r.pinned, r.module, r.module_version)}
    assert stale == {}, f"{RERUN}: these entries are not the code's pins"


def test_no_pin_is_behind_without_a_reason() -> None:
    behind = {r.name: f"{r.pinned} < {r.newest_patch}" for r in load() if r.status == "behind" and not REASONS.get(r.name)}
    assert behind == {}, (f"behind: {behind}; take the newer patch, or record why not (a reason the project states) "
                          "in tools/pin_versions.py REASONS")


def test_saved_entries_are_well_formed() -> None:
    for r in load():
        assert r.status in ("current", "behind", "unchecked"), r.name
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", r.checked), r.name
        assert r.status != "unchecked" or r.reason.startswith("cannot be checked from the module proxy"), r.name
        assert (r.status == "behind") == bool(r.newer), r.name


def test_every_reason_names_a_pin() -> None:
    assert set(REASONS) <= {p.name for p in pins()}


# The version-line logic, against a fake proxy ----------------------------------------------------------------------


def fake_proxy(listed: list[str] | None, served: set[str], asked: list[str]) -> Query:
    """A proxy whose `@v/list` is `listed` (None: refused) and which serves exactly the versions in `served`."""

    def query(target: str) -> Answer:
        asked.append(target)
        if "@" not in target:
            return REFUSED if listed is None else Answer(tuple(listed))
        return Answer((target.split("@", 1)[1],), time="2026-09-23T18:59:36Z") if target in served else REFUSED

    return query


def test_a_line_is_major_and_minor_of_a_release() -> None:
    versions = releases(["v1.36.4", "v1.36.10", "v1.37.0", "v2.36.1", "v1.38.0-beta.0", "v0.0.0-20250917190837-d73a0086a6ba",
                         "v26.3.3+incompatible"])
    assert [str(v) for v in versions] == ["v1.36.4", "v1.36.10", "v1.37.0", "v2.36.1"]
    assert [str(v) for v in on_line(versions, (1, 36))] == ["v1.36.4", "v1.36.10"]
    assert Version(1, 36, 10) > Version(1, 36, 9)


def test_patch_probing_stops_at_the_first_refusal() -> None:
    asked: list[str] = []
    query = fake_proxy([], {"m@v1.36.5", "m@v1.36.6", "m@v1.36.8"}, asked)
    assert [str(v) for v in probe_patches(query, "m", Version(1, 36, 4))] == ["v1.36.5", "v1.36.6"]
    assert asked == ["m@v1.36.5", "m@v1.36.6", "m@v1.36.7"]


def test_a_newer_patch_beyond_the_list_is_found_and_other_lines_are_not_the_same_line() -> None:
    served = {"m@v1.36.4", "m@v1.36.5", "m@v1.37.0", "m@v1.37.2"}
    query = fake_proxy(["v1.36.1", "v1.36.3", "v1.37.2", "v1.38.0-beta.0"], served, [])
    result = check(_pin("v1.36.4"), query, "2026-11-29")
    assert (result.status, result.newer, result.newest_patch) == ("behind", ["v1.36.5"], "v1.36.5")
    assert (result.newest_line, result.newest_seen, result.pin_served) == ("v1.37", "v1.37.2", True)
    assert unexplained([result]) == ["kubernetes-1.36"]


def test_a_recorded_reason_explains_a_pin_behind() -> None:
    query = fake_proxy(None, {"m@v1.36.4", "m@v1.36.5"}, [])
    result = check(_pin("v1.36.4"), query, "2026-11-29", {"kubernetes-1.36": "kubeadm pins it"})
    assert (result.status, result.reason, unexplained([result])) == ("behind", "kubeadm pins it", [])


def test_the_newest_patch_is_current() -> None:
    query = fake_proxy(["v1.36.1"], {"m@v1.36.4"}, [])
    result = check(_pin("v1.36.4"), query, "2026-11-29")
    assert (result.status, result.newer, result.newest_line, result.newest_seen) == ("current", [], "v1.36", "v1.36.4")


def test_a_refused_pin_is_unchecked_unless_a_newer_patch_is_served() -> None:
    unchecked = check(_pin("v1.35.9"), fake_proxy(["v1.35.4"], {"m@v1.35.4"}, []), "2026-11-29")
    assert unchecked.status == "unchecked" and "m@v1.35.9: 403 Forbidden" in unchecked.reason
    assert unchecked.newest_patch == "v1.35.4"
    behind = check(_pin("v1.34.6"), fake_proxy([], {"m@v1.34.7"}, []), "2026-11-29")
    assert (behind.status, behind.newer, behind.pin_served) == ("behind", ["v1.34.7"], False)


def test_prometheus_module_versions() -> None:
    assert prometheus_module_version("v3.14.0") == "v0.314.0"
    assert prometheus_module_version("3.5.2") == "v0.305.2"


def test_a_refusal_is_told_from_a_failure() -> None:
    stderr = ("go: k8s.io/kubernetes@v1.36.9: reading https://proxy.golang.org/k8s.io/kubernetes/@v/v1.36.9.info: "
              "403 Forbidden\n\tserver response: This module version is not available.\n")
    assert refusal_text(stderr) == "403 Forbidden This module version is not available."
    assert refusal_text("go: dial tcp: lookup proxy.golang.org: no such host\n") == ""


def _pin(version: str) -> Pin:
    """A Kubernetes-like pin of module "m" (the code spells it without the v)."""
    return Pin("kubernetes-" + version.removeprefix("v").rsplit(".", 1)[0], "m", version.removeprefix("v"), "a test",
               version)
