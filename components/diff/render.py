"""A PlanDiff for people: terminal lines and a report.html section (JSON is PlanDiff.as_dict())."""

from __future__ import annotations

from html import escape
from typing import Any

from rich.console import Console

from gpucluster.diff.compare import Change, PlanDiff
from gpucluster.diff.cost import cost_lines
from gpucluster.diff.metrics import metrics_line
from gpucluster.diff.rollout import rollout_lines
from gpucluster.diff.values import ValueChange
from gpucluster.diff.visible import visible

ACTIONS = (("replace", "~+", "replaced"), ("delete", "-", "deleted"), ("create", "+", "created"),
           ("update", "~", "updated"))
MAX_PATHS = 4
MAX_VALUES = 8
"""Old -> new lines per resource in the terminal; `--json` lists more."""


def _number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def _signed(value: float) -> str:
    return ("+" if value > 0 else "") + _number(value)


def _amount(key: str, value: float, signed: bool = True) -> str:
    """Quota amounts as people read them: memory in GiB (Kueue quantities are bytes here)."""
    if key.endswith("memory"):
        value = value / 2**30
        return f"{key} {_signed(value) if signed else _number(value)} GiB"
    return f"{key} {_signed(value) if signed else _number(value)}"


def capacity_lines(capacity: dict[str, Any]) -> list[str]:
    base, head, delta = capacity["base"], capacity["head"], capacity["delta"]
    lines = [f"{label}: {_number(base[key])} -> {_number(head[key])} ({_signed(delta[key])})"
             for key, label in (("nodes", "nodes"), ("gpus", "GPUs"), ("infinibandDomains", "InfiniBand domains"))]
    if base.get("podIps") and head.get("podIps"):
        b, h = base["podIps"], head["podIps"]
        lines.append(f"pod IPs needed: {_number(b['needed'])} -> {_number(h['needed'])} "
                     f"({_signed(h['needed'] - b['needed'])}); available {_number(b['available'])} -> "
                     f"{_number(h['available'])}")
    for pool, amounts in delta["pools"].items():
        if any(amounts.values()):
            lines.append(f"pool {pool}: " + ", ".join(f"{k} {_signed(v)}" for k, v in amounts.items() if v))
    for team, amounts in delta["teamQuota"].items():
        if team not in head["teamQuota"]:
            lines.append(f"team {team}: quota removed")
        elif team not in base["teamQuota"]:
            lines.append(f"team {team}: new, quota " + ", ".join(_amount(k, v, signed=False)
                                                               for k, v in head["teamQuota"][team].items()))
        elif any(amounts.values()):
            lines.append(f"team {team} quota: " + ", ".join(_amount(k, v) for k, v in amounts.items() if v))
    for team, amounts in delta.get("teamQuotaByFlavor", {}).items():
        if team in base["teamQuota"] and team in head["teamQuota"] and any(amounts.values()):
            lines.append(f"team {team} quota per flavor: " + ", ".join(
                _amount(k, v) for k, v in amounts.items() if v))
    return lines


def _paths(paths: tuple[str, ...] | list[str]) -> str:
    shown = ", ".join(paths[:MAX_PATHS])
    return shown + (f" and {len(paths) - MAX_PATHS} more" if len(paths) > MAX_PATHS else "")


def value_lines(change: Change, limit: int = MAX_VALUES) -> list[str]:
    """`path: old -> new` for the first `limit` changed paths, and how many more there are."""
    lines = [v.text() for v in change.values[:limit]]
    if len(change.values) > limit:
        lines.append(f"... and {len(change.values) - limit} more changed paths (`gpucluster diff --json` lists them)")
    return lines


def print_diff(console: Console, diff: PlanDiff) -> None:
    def say(text: str) -> None:
        # Names, values and boot lines come from the plan folders: control characters are shown, not sent
        # (components/diff/visible.py); no markup, highlighting or :emoji: codes are interpreted.
        console.print(visible(text), markup=False, highlight=False, emoji=False, soft_wrap=True)

    counts = ", ".join(f"{diff.count(a)} {word}" for a, _, word in ACTIONS)
    say(f"gpucluster diff {diff.base} -> {diff.head}: {counts}; {len(diff.errors)} errors, "
        f"{len(diff.flags) - len(diff.errors)} warnings")
    for line in cost_lines(diff.cost):
        say(line)
    for flag in diff.flags:
        say(f"  {flag.severity.upper()} [{flag.source}] {flag.path}: {flag.message}")
        if flag.fix:
            say(f"      fix: {flag.fix}")
    for action, mark, word in ACTIONS:
        changes = [c for c in diff.changes if c.action == action]
        if changes:
            say(f"{word} ({len(changes)}):")
        for change in changes:
            detail = ""
            if change.replace_reasons:
                detail = f": replaced because {_paths(list(change.replace_reasons))}"
            elif change.paths:
                detail = f": {_paths(change.paths)}"
            say(f"  {mark} {change.type} {change.name}{detail}")
            for line in value_lines(change):
                say(f"      {line}")
    applied = [b.resource for b in diff.boot if b.applied]
    kept = [b.resource for b in diff.boot if not b.applied]
    if applied:
        say(f"boot documents changed ({len(applied)}; VMs created from now on boot with them): {', '.join(applied)}")
    if kept:
        say(f"boot documents changed but not applied (the resource ignores them; roll by the runbook): "
            f"{', '.join(kept)}")
    for image in diff.images:
        say(f"node image {image.resource}: {image.before} -> {image.after}; Azure applies it to {image.applies}"
            if image.applies.startswith("new") else
            f"node image {image.resource}: {image.before} -> {image.after}; {image.applies}")
    for line in rollout_lines(diff.rollout):
        say(line)
    if diff.boot_files:
        files = diff.boot_files
        for key in ("added", "removed"):
            if files[key]:
                say(f"boot/ files {key}: {', '.join(files[key])}")
        for name, lines in files["changed"].items():
            say(f"boot/{name} changed:")
            for line in lines:
                say(f"    {line}")
    say("capacity:")
    for line in capacity_lines(diff.capacity):
        say(f"  {line}")
    if (metrics := metrics_line(diff.metrics)) is not None:
        say(metrics)
    for note in diff.notes:
        say(f"note: {note}")


def _html_values(change: dict[str, Any]) -> str:
    values = [ValueChange.from_dict(v).text() for v in change.get("values") or []]
    more = len(values) - MAX_VALUES + int(change.get("valuesOmitted") or 0)
    return "<br>".join(escape(visible(v)) for v in values[:MAX_VALUES]) + (
        f"<br>... and {more} more" if more > 0 else "")


def diff_section(diff: dict[str, Any]) -> str:
    """The report.html section for the diff against the base plan (`gpucluster plan --base`)."""
    s = diff["summary"]
    parts = [f"<h2>Change against {escape(diff['base'])}</h2>",
             f"<p>{s['create']} created, {s['update']} updated, {s['replace']} replaced, {s['delete']} deleted; "
             f"{s['errors']} errors, {s['warnings']} warnings; {s['bootDocuments']} boot documents changed.</p>",
             "<ul>" + "".join(f"<li>{escape(line)}</li>" for line in cost_lines(diff.get("cost"))) + "</ul>"]
    if diff["flags"]:
        rows = "".join(f'<tr><td class="{"bad" if f["severity"] == "error" else "warn"}">{escape(f["severity"])}</td>'
                       f"<td>{escape(f['kind'])}</td><td>{escape(f['resource'])}</td><td>{escape(f['message'])}</td>"
                       f"<td>{escape(f['fix'] or '')}</td></tr>" for f in diff["flags"])
        parts.append("<table><tr><th>severity</th><th>kind</th><th>resource</th><th>what</th><th>fix</th></tr>"
                     f"{rows}</table>")
    rows = "".join(f"<tr><td class=l>{escape(c['action'])}</td><td class=l>{escape(c['type'])}</td>"
                   f"<td class=l>{escape(c['name'])}</td>"
                   f"<td class=l>{escape(_paths(c['replace_reasons'] or c['paths']))}</td>"
                   f"<td class=l>{_html_values(c)}</td></tr>"
                   for c in diff["changes"] if c["action"] != "create")
    created = sum(c["action"] == "create" for c in diff["changes"])
    if rows:
        parts.append("<table><tr><th>action</th><th>type</th><th>resource</th><th>inputs</th><th>old -&gt; new</th>"
                     f"</tr>{rows}</table>")
    if created:
        parts.append(f"<p>{created} resources created: "
                     f"{escape(', '.join(c['name'] for c in diff['changes'] if c['action'] == 'create'))}</p>")
    if diff["boot"]:
        parts.append(f"<p>Boot documents changed: {escape(', '.join(b['resource'] for b in diff['boot']))}</p>")
    if diff.get("images"):
        rows = "".join(f"<tr><td>{escape(i['resource'])}</td><td>{escape(i['before'])}</td><td>{escape(i['after'])}</td>"
                       f"<td>{escape(i['applies'])}</td></tr>" for i in diff["images"])
        parts.append("<table><tr><th>scale set or VM</th><th>node image</th><th>becomes</th><th>Azure applies it to"
                     f"</th></tr>{rows}</table>")
    if diff.get("rollout"):
        parts.append("<pre>" + escape("\n".join(visible(line) for line in rollout_lines(diff["rollout"]))) + "</pre>")
    parts.append("<ul>" + "".join(f"<li>{escape(line)}</li>" for line in capacity_lines(diff["capacity"])) + "</ul>")
    if (metrics := metrics_line(diff.get("metrics"))) is not None:
        parts.append(f"<p>{escape(metrics)}</p>")
    return "".join(parts)
