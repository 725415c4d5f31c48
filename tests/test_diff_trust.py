"""`gpucluster diff` over plan folders from anyone: no link followed out of a folder, no control character sent to
the terminal, no comparison of plans that are not of one deployment, and the old -> new value of every change.

URN shape (what makes two stacks' plans incomparable): pulumi/pulumi sdk/go/common/resource/urn.go (NewURN,
`urn:pulumi:<stack>::<project>::<type>::<name>`).
"""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from gpucluster.diff.command import diff_against_base
from gpucluster.diff.compare import diff_sides
from gpucluster.diff.render import print_diff
from gpucluster.diff.sides import Side
from gpucluster.diff.values import ValueChange
from gpucluster.diff.visible import visible
from gpucluster.errors import SpecError
from tests.support.cli import gpucluster

SECRET = "-----BEGIN OPENSSH PRIVATE KEY----- do-not-print"


def _copy(plan: Path, to: Path) -> Path:
    """A plain copy of a plan folder (`out/dev` is a link to the version the tool keeps; copytree follows it)."""
    shutil.copytree(plan, to)
    return to


@pytest.fixture()
def pair(dev_out: Path, tmp_path: Path) -> tuple[Path, Path]:
    return _copy(dev_out, tmp_path / "base"), _copy(dev_out, tmp_path / "head")


def _secret_folder(tmp_path: Path) -> Path:
    ssh = tmp_path / "home" / ".ssh"
    ssh.mkdir(parents=True)
    (ssh / "id_ed25519").write_text(SECRET + "\n")
    (ssh / "etcd-0.yaml").write_text(SECRET + "\n")
    return ssh


def _link_boot_folder(head: Path, ssh: Path) -> None:
    shutil.rmtree(head / "boot")
    (head / "boot").symlink_to(ssh)


def _link_boot_file(head: Path, ssh: Path) -> None:
    (head / "boot" / "etcd-0.yaml").unlink()
    (head / "boot" / "etcd-0.yaml").symlink_to(ssh / "id_ed25519")


def _link_inside(head: Path, ssh: Path) -> None:
    """Even a link that stays inside the folder: the tool never writes one."""
    (head / "boot" / "etcd-0.yaml").unlink()
    (head / "boot" / "etcd-0.yaml").symlink_to(head / "boot" / "etcd-1.yaml")


def _hard_link(head: Path, ssh: Path) -> None:
    target = head.parent / "id_ed25519"
    shutil.copy(ssh / "id_ed25519", target)
    (head / "boot" / "etcd-0.yaml").unlink()
    os.link(target, head / "boot" / "etcd-0.yaml")


def _fifo(head: Path, ssh: Path) -> None:
    (head / "boot" / "etcd-0.yaml").unlink()
    os.mkfifo(head / "boot" / "etcd-0.yaml")  # a read of it would never return


def _link_summary(head: Path, ssh: Path) -> None:
    (head / "summary.json").unlink()
    (head / "summary.json").symlink_to(ssh / "id_ed25519")


def _link_preview(head: Path, ssh: Path) -> None:
    moved = head.parent / "elsewhere.json"
    (head / "preview.json").rename(moved)
    (head / "preview.json").symlink_to(moved)


@pytest.mark.parametrize(("make", "where", "said"), [
    (_link_boot_folder, "boot", "is a link"),
    (_link_boot_file, "boot/etcd-0.yaml", "is a link"),
    (_link_inside, "boot/etcd-0.yaml", "is a link"),
    (_hard_link, "boot/etcd-0.yaml", "is a hard link"),
    (_fifo, "boot/etcd-0.yaml", "is not a regular file"),
    (_link_summary, "summary.json", "is a link"),
    (_link_preview, "preview.json", "is a link"),
])
def test_diff_never_reads_through_a_link(pair: tuple[Path, Path], tmp_path: Path, make, where: str,
                                         said: str) -> None:
    """Before: `boot/` linked to ~/.ssh printed the private key as a boot file added to the plan."""
    base, head = pair
    make(head, _secret_folder(tmp_path))
    for args in ((str(base), str(head)), (str(base), str(head), "--json")):
        result = gpucluster("diff", *args)
        assert result.returncode == 2, result.stdout
        assert SECRET not in result.stdout + result.stderr
        [line] = result.stderr.splitlines()
        assert line.startswith(f"error: {head / where}: {said}") and "plan again" in line
        assert result.stdout == ""


def test_the_named_folder_may_be_a_link(dev_out: Path, tmp_path: Path) -> None:
    """`out/<stack>` is itself a link to the version the tool keeps beside it: naming it is fine."""
    assert dev_out.is_symlink()
    result = gpucluster("diff", str(dev_out), str(dev_out))
    assert result.returncode == 0, result.stderr


HOSTILE = "x\x1b]0;owned\x07\x1b[2J\x1b[31mred\rover \u202eevil\x85 :thumbs_up: [bold]b[/bold]"


def test_control_characters_from_documents_are_shown_as_escapes(pair: tuple[Path, Path]) -> None:
    """Before: boot file text and input values went to the terminal raw (ESC sequences cleared the screen, set
    the title; a CR overwrote the line; rich turned `:thumbs_up:` into an emoji)."""
    base, head = pair
    boot = head / "boot" / "etcd-0.yaml"
    boot.write_text(boot.read_text() + HOSTILE + "\n")
    preview = json.loads((head / "preview.json").read_text())
    step = next(s for s in preview["steps"] if s["newState"]["type"] == "azure-native:network:VirtualNetwork")
    step["newState"]["inputs"]["tags"]["note"] = HOSTILE
    (head / "preview.json").write_text(json.dumps(preview))
    result = gpucluster("diff", str(base), str(head))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for raw in ("\x1b", "\x07", "\r", "\u202e", "\x85"):
        assert raw not in out
    escaped = visible(HOSTILE)
    assert f"+{escaped}" in out  # the boot file's added line
    assert 'tags.note: (none) -> "x\\u001b]0;owned\\u0007\\u001b[2J' in out  # the input's value, as JSON
    assert ":thumbs_up: [bold]b[/bold]" in out and "\\x1b[2J" in out and "\\r" in out and "\\u202e" in out
    as_json = gpucluster("diff", str(base), str(head), "--json")
    assert "\x1b" not in as_json.stdout and HOSTILE in as_json.stdout.encode().decode("unicode_escape")


def test_visible_escapes_every_control_but_tab() -> None:
    assert visible("a\tb\nc\x00\x7f\x9b\u2028\u200b é 中") == "a\tb\\nc\\x00\\x7f\\x9b\\u2028\\u200b é 中"


def _restack(folder: Path, stack: str) -> None:
    """What planning the same stack file under another name does to every URN."""
    document = json.loads((folder / "preview.json").read_text().replace("urn:pulumi:dev::", f"urn:pulumi:{stack}::"))
    if isinstance(document.get("config"), dict) and "stack" in document["config"]:
        document["config"]["stack"] = stack
    (folder / "preview.json").write_text(json.dumps(document))


def test_plans_of_different_stacks_are_refused_with_the_reason(pair: tuple[Path, Path]) -> None:
    """Before: every resource read as deleted and created, with dozens of false errors and no hint."""
    base, head = pair
    _restack(head, "dev-copy")
    result = gpucluster("diff", str(base), str(head))
    assert result.returncode == 2 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: {base} -> {head}: not comparable: the base is stack 'dev' of project "
                           "'gpucluster' and the head stack 'dev-copy'")
    assert "--across-stacks" in line
    anyway = gpucluster("diff", str(base), str(head), "--across-stacks", "--json")
    assert anyway.returncode == 0, anyway.stderr
    document = json.loads(anyway.stdout)
    assert document["changes"] == [] and document["flags"] == []
    assert any("compared anyway (--across-stacks)" in note for note in document["notes"])


def test_plans_of_different_clusters_are_refused(pair: tuple[Path, Path]) -> None:
    base, head = pair
    summary = json.loads((head / "summary.json").read_text())
    summary["cluster"]["name"] = "other"
    (head / "summary.json").write_text(json.dumps(summary))
    result = gpucluster("diff", str(base), str(head))
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert "not comparable: the base is cluster 'dev' and the head cluster 'other'" in line


def test_plan_base_of_another_stack_is_refused(pair: tuple[Path, Path]) -> None:
    base, head = pair
    _restack(base, "prod")
    document = json.loads((head / "preview.json").read_text())
    data = json.loads((head / "summary.json").read_text())
    with pytest.raises(SpecError, match=r"not comparable: the base is stack 'prod'.*give --base the plan folder of"):
        diff_against_base(str(base), document, data)


def _state(urn: str, inputs: dict) -> dict:
    return {"urn": urn, "type": "azure-native:network:VirtualNetwork", "custom": True, "inputs": inputs}


URN = "urn:pulumi:dev::gpucluster::azure-native:network:VirtualNetwork::vnet"
LONG = "a" * 1000


def test_updates_show_old_and_new_values_by_path() -> None:
    """Before: only the changed paths were listed, never what they held."""
    before = {"tags": {"team": "a", "gone": "x"}, "addressSpace": {"addressPrefixes": ["10.0.0.0/16", "10.1.0.0/16"]},
              "note": "short", "flags": [], "password": "[secret]"}
    after = {"tags": {"team": "b"}, "addressSpace": {"addressPrefixes": ["10.0.0.0/16", "10.2.0.0/16", "10.3.0.0/16"]},
             "note": LONG, "flags": [1], "password": "[secret]"}
    digests = ({URN: {"password": "one"}}, {URN: {"password": "two"}})
    result = diff_sides(Side("base", {URN: _state(URN, before)}, digests[0]),
                        Side("head", {URN: _state(URN, after)}, digests[1]))
    [change] = result.changes
    texts = [v.text() for v in change.values]
    assert texts[:4] == ['addressSpace.addressPrefixes[1]: "10.1.0.0/16" -> "10.2.0.0/16"',
                         'addressSpace.addressPrefixes[2]: (none) -> "10.3.0.0/16"',
                         "flags: [] -> (none)", "flags[0]: (none) -> 1"]
    assert 'note: "short" -> "' + "a" * 59 + '... (1,002 characters)' in texts
    assert "password: [secret] changed" in texts
    assert 'tags.gone: "x" -> (none)' in texts and 'tags.team: "a" -> "b"' in texts
    as_json = {v["path"]: v for v in change.as_dict()["values"]}
    assert as_json["tags.team"] == {"path": "tags.team", "old": "a", "new": "b"}
    assert as_json["tags.gone"] == {"path": "tags.gone", "old": "x"}
    assert as_json["password"] == {"path": "password", "old": "[secret]", "new": "[secret]", "secret": True}
    assert as_json["note"]["new"].endswith("... (1,000 characters)") and len(as_json["note"]["new"]) < 530
    out = io.StringIO()
    print_diff(Console(file=out, width=300), result)
    assert '      tags.team: "a" -> "b"' in out.getvalue()
    assert ValueChange.from_dict(as_json["tags.gone"]).text() == 'tags.gone: "x" -> (none)'


def test_cli_diff_shows_old_and_new_in_terminal_and_json(pair: tuple[Path, Path]) -> None:
    base, head = pair
    preview = json.loads((head / "preview.json").read_text())
    step = next(s for s in preview["steps"] if s["urn"].endswith("::etcd-0"))
    step["newState"]["inputs"]["hardwareProfile"]["vmSize"] = "Standard_L16s_v3"
    (head / "preview.json").write_text(json.dumps(preview))
    text = gpucluster("diff", str(base), str(head))
    assert '      hardwareProfile.vmSize: "Standard_L8s_v3" -> "Standard_L16s_v3"' in text.stdout
    document = json.loads(gpucluster("diff", str(base), str(head), "--json").stdout)
    [change] = document["changes"]
    assert change["values"] == [{"path": "hardwareProfile.vmSize", "old": "Standard_L8s_v3",
                                 "new": "Standard_L16s_v3"}]


def test_two_long_values_that_differ_late_read_differently() -> None:
    """An alert threshold `> 1800` -> `> 1824` at the end of a long expression: both sides are cut where they first
    differ (a cut at the same prefix would print two identical lines), in the terminal and in --json."""
    from gpucluster.diff.values import JSON_CHARS, SHOWN_CHARS, ValueChange

    expression = "sum by (node) (rate(DCGM_FI_DEV_XID_ERRORS_TOTAL[10m])) and on (node) up == 1 and x"
    old, new = ValueChange("rule", f"{expression} > 1800", f"{expression} > 1824").text().split(": ", 1)[1].split(" -> ")
    assert old != new and "1800" in old and "1824" in new
    assert len(f"{expression} > 1800") > SHOWN_CHARS
    long = ValueChange("script", "a" * JSON_CHARS + "old", "a" * JSON_CHARS + "new").as_dict()
    assert long["old"] != long["new"] and "old" in long["old"] and "(503 characters)" in long["new"]
    early = ValueChange("x", "b" + "c" * 100, "d" + "c" * 100).text()
    assert early.count('"b') == 1 and early.count('"d') == 1  # a difference at the start keeps the start
