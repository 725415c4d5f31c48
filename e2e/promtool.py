"""promtool, Prometheus' own rule engine at the pinned version (e2e/consumers.py), over what the program declares for
the metrics pipeline (docs/metrics.md): the edge shards' prometheus.yml and rule file, the Azure Monitor workspace's
rule groups written as a Prometheus rule file, and unit-test files that feed the rules the series the exporters write.

The program runs under the offline engine, as `gpucluster plan` runs it, so what is checked is what would be deployed;
the values Azure gives only at deploy are filled in with values of the shape Azure gives (`AT_DEPLOY`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e2e.consumers import binary
from gpucluster.kubernetes.objects.metrics import NAMESPACE, PROMETHEUS
from gpucluster.offline.engine import Registration, run_program
from gpucluster.spec import ClusterSpec, load_stack_file

ROOT = Path(__file__).resolve().parent.parent
RULE_GROUP = "azure-native:alertsmanagement:PrometheusRuleGroup"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
AT_DEPLOY_MARK = re.compile(r"\[at deploy: ([^\]]+)\]")
AT_DEPLOY: dict[str, str] = {
    # The shapes Azure gives: a data collection endpoint's metrics ingestion URL and a rule's immutable id.
    "metrics ingestion endpoint": "https://prod-metrics-workspace-x7k2.eastus2-1.metrics.ingest.monitor.azure.com",
    "data collection rule immutable id": "dcr-5e0c3f9a8b7d4e21a6c9f0b1d2e3f4a5",
}


@dataclass(frozen=True)
class PromtoolRun:
    args: tuple[str, ...]
    returncode: int
    output: str
    """stdout then stderr."""

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def __str__(self) -> str:
        return f"$ promtool {' '.join(self.args)}\n(exit {self.returncode})\n{self.output}"


def promtool(*args: str, cwd: Path | None = None, env: Mapping[str, str] | None = None,
             timeout: int = 600) -> PromtoolRun:
    result = subprocess.run([str(binary("prometheus", "promtool")), *args], cwd=cwd, env={**os.environ, **(env or {})},
                            capture_output=True, text=True, timeout=timeout)
    return PromtoolRun(args, result.returncode, (result.stdout + result.stderr).strip())


def promtool_version() -> str:
    return promtool("--version").output


@dataclass(frozen=True)
class Rendered:
    """What a stack's program declares for the metrics pipeline."""

    spec: ClusterSpec
    config_maps: dict[str, dict[str, str]]
    """The metrics namespace's ConfigMaps: name -> data."""
    deployments: dict[str, dict[str, Any]]
    """The metrics namespace's workloads (Deployments, the shards' StatefulSets): name -> object."""
    rule_groups: dict[str, dict[str, Any]]
    """The workspace's PrometheusRuleGroups: resource name -> inputs (ARM's shape)."""

    @property
    def shards(self) -> list[str]:
        """The edge Prometheus shards' StatefulSets, in shard order."""
        return sorted((name for name in self.deployments if re.fullmatch(f"{PROMETHEUS}-[0-9]+", name)),
                      key=lambda name: int(name.rsplit("-", 1)[1]))

    def config(self, shard: str) -> dict[str, Any]:
        """A shard's prometheus.yml, with the values known only at deploy filled in."""
        return at_deploy(yaml.safe_load(self.config_maps[shard]["prometheus.yml"]))

    def edge_rules(self) -> dict[str, str]:
        """The edge rule files (file name -> text), as mounted where every shard's `rule_files` reads them."""
        return dict(self.config_maps[f"{PROMETHEUS}-rules"])


def _in_namespace(registration: Registration, kind: str) -> bool:
    inputs = registration.inputs
    return inputs.get("kind") == kind and inputs.get("metadata", {}).get("namespace") == NAMESPACE


def render_stack(stack: str) -> Rendered:
    """The stack's program under the offline engine (what `gpucluster plan` runs), its metrics objects read back."""
    loaded = load_stack_file(ROOT / "stacks" / f"Pulumi.{stack}.yaml", stack)
    run = run_program(ROOT / "__main__.py", "gpucluster", stack, loaded.config)
    return Rendered(
        loaded.spec,
        {r.inputs["metadata"]["name"]: r.inputs["data"] for r in run.registrations if _in_namespace(r, "ConfigMap")},
        {r.inputs["metadata"]["name"]: r.inputs for r in run.registrations if _in_namespace(r, "Deployment")
         or _in_namespace(r, "StatefulSet")},
        {r.name: r.inputs for r in run.registrations if r.type == RULE_GROUP})


def at_deploy(node: Any) -> Any:
    """`node` with every `[at deploy: ...]` placeholder replaced by `AT_DEPLOY`'s value (KeyError on one it lacks)."""
    if isinstance(node, str):
        return AT_DEPLOY_MARK.sub(lambda m: AT_DEPLOY[m.group(1)], node)
    if isinstance(node, dict):
        return {k: at_deploy(v) for k, v in node.items()}
    if isinstance(node, list):
        return [at_deploy(v) for v in node]
    return node


def iso_duration(value: str) -> str:
    """An ISO 8601 duration as ARM takes them (`PT1H30M`) as a Prometheus duration (`1h30m`)."""
    match = re.fullmatch(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?", value)
    assert match, f"not an ISO 8601 duration: {value!r}"
    return "".join(f"{int(n)}{unit}" for n, unit in zip(match.groups(), "dhms", strict=True) if n and int(n)) or "0s"


def workspace_rule_file(rule_groups: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The workspace's enabled rule groups as a Prometheus rule file, one group per resource. ARM's `expression` is
    Prometheus' `expr`; its numeric `severity` and `enabled` have no Prometheus counterpart (the `severity` label
    carries the former)."""
    groups = []
    for name, inputs in rule_groups.items():
        if not inputs.get("enabled", True):
            continue
        rules = []
        for rule in inputs["rules"]:
            out: dict[str, Any] = {"record": rule["record"]} if "record" in rule else {"alert": rule["alert"]}
            out["expr"] = rule["expression"]
            if "for" in rule:
                out["for"] = iso_duration(rule["for"])
            out.update({key: dict(rule[key]) for key in ("labels", "annotations") if rule.get(key)})
            rules.append(out)
        groups.append({"name": name, "interval": iso_duration(inputs["interval"]), "rules": rules})
    return {"groups": groups}


def as_written(rule_file: Mapping[str, Any], external_labels: Mapping[str, str], replicas: Sequence[str]) -> dict[str, Any]:
    """An edge rule file as the workspace receives its output: each replica of a shard evaluates it and its remote
    write adds the shard's external labels (`replica`: the pod's name). One engine runs it all in a unit test, so each
    group runs once per replica with those labels as the group's labels."""
    return {"groups": [{**group, "name": f"{group['name']}@{replica}", "labels": {**external_labels, "replica": replica}}
                       for replica in replicas for group in rule_file["groups"]]}


def lay_out_pod(rendered: Rendered, shard: str, root: Path) -> Path:
    """A shard pod's files under `root`: its ConfigMap volumes at their mount paths and the service account's token
    and CA, with the config's absolute paths moved under `root` (and the deploy-time values filled in). Returns the
    config file's path."""
    pod = rendered.deployments[shard]["spec"]["template"]["spec"]
    container = next(c for c in pod["containers"] if c["name"] == PROMETHEUS)
    volumes = {v["name"]: v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v}
    for mount in container["volumeMounts"]:
        if mount["name"] in volumes:
            for file, text in rendered.config_maps[volumes[mount["name"]]].items():
                _write(root, f"{mount['mountPath']}/{file}", text)
    for file in ("token", "ca.crt", "namespace"):
        _write(root, f"{SERVICE_ACCOUNT_DIR}/{file}", NAMESPACE if file == "namespace" else f"[{file}]\n")
    flag = next(a for a in container["args"] if a.startswith("--config.file="))
    config_path = root / flag.split("=", 1)[1].lstrip("/")
    config = _rooted(rendered.config(shard), root)
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    return config_path


def _write(root: Path, path: str, text: str) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


FILE_KEYS = {"credentials_file", "ca_file", "cert_file", "key_file", "bearer_token_file", "password_file"}
"""The config keys that name a file (prometheus/common config.HTTPClientConfig, TLSConfig)."""


def _rooted(node: Any, root: Path, key: str = "") -> Any:
    if isinstance(node, str) and (key in FILE_KEYS or key == "rule_files") and node.startswith("/"):
        return str(root / node.lstrip("/"))
    if isinstance(node, dict):
        return {k: _rooted(v, root, k) for k, v in node.items()}
    if isinstance(node, list):
        return [_rooted(v, root, key) for v in node]
    return node


def hashmod(value: str, modulus: int) -> int:
    """Prometheus' relabel `hashmod` (model/relabel/relabel.go): the last 8 bytes of the MD5, big-endian, mod modulus."""
    return int.from_bytes(hashlib.md5(value.encode()).digest()[8:], "big") % modulus


def relabel(labels: Mapping[str, str], configs: Iterable[Mapping[str, Any]]) -> dict[str, str] | None:
    """Prometheus' relabelling (model/relabel/relabel.go) for the actions the project's configs use: `keep`, `drop`,
    `replace`, `hashmod`; None when a rule drops the target or series."""
    out = dict(labels)
    for config in configs:
        action = config.get("action", "replace")
        value = config.get("separator", ";").join(out.get(name, "") for name in config.get("source_labels", []))
        pattern = re.compile(config.get("regex", "(.*)"))
        match = pattern.fullmatch(value)
        if (action == "keep" and not match) or (action == "drop" and match):
            return None
        if action == "hashmod":
            out[config["target_label"]] = str(hashmod(value, config["modulus"]))
        elif action == "replace" and match:
            target = _expand(config["target_label"], match)
            replacement = _expand(config.get("replacement", "$1"), match)
            if replacement:
                out[target] = replacement
            else:
                out.pop(target, None)
        elif action not in ("keep", "drop", "replace"):
            raise NotImplementedError(f"relabel action {action!r}")
    return out


def _expand(template: str, match: re.Match[str]) -> str:
    """Go's regexp Expand, for `$1`, `${1}` and `${name}`."""
    return re.sub(r"\$\{?(\w+)\}?", lambda m: match.group(int(m.group(1)) if m.group(1).isdigit() else m.group(1)) or "",
                  template)


def target_labels(job: Mapping[str, Any], discovered: Mapping[str, str]) -> dict[str, str] | None:
    """A discovered target's labels after the job's `relabel_configs` (the `__` labels removed, `instance` defaulting
    to the address), None when the job drops it."""
    out = relabel({"job": job["job_name"], **discovered}, job.get("relabel_configs", []))
    if out is None:
        return None
    out.setdefault("instance", out["__address__"])
    return {k: v for k, v in out.items() if not k.startswith("__")}


Shape = Callable[[float], float | None]
"""A series' value at a minute of a test, None while it has no sample."""


@dataclass(frozen=True)
class Series:
    metric: str
    labels: Mapping[str, str]
    shape: Shape

    def selector(self) -> str:
        return self.metric + "{" + ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(self.labels.items())) + "}"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def notation(samples: Sequence[float | None]) -> str:
    """promtool's expanding notation for the samples: runs of one step as `a+bxn`, absent samples as `_`, and
    `stale` where a series ends, as Prometheus marks a series its target stopped exposing."""
    parts: list[str] = []
    i = 0
    while i < len(samples):
        value = samples[i]
        j = i + 1
        if value is None:
            while j < len(samples) and samples[j] is None:
                j += 1
            missing = j - i
            if i > 0:
                parts.append("stale")
                missing -= 1
            if missing:
                parts.append("_" if missing == 1 else f"_x{missing}")
            i = j
            continue
        following = samples[j] if j < len(samples) else None
        step = following - value if following is not None else 0.0
        while j < len(samples) and (current := samples[j]) is not None and (previous := samples[j - 1]) is not None \
                and current - previous == step:
            j += 1
        run = j - i
        if run == 1:
            parts.append(_number(value))
        elif step == 0:
            parts.append(f"{_number(value)}x{run - 1}")
        else:
            parts.append(f"{_number(value)}{'+' if step > 0 else '-'}{_number(abs(step))}x{run - 1}")
        i = j
    return " ".join(parts)


@dataclass(frozen=True)
class AlertCheck:
    minute: int
    alert: str
    firing: tuple[Mapping[str, str], ...]
    """The labels of each alert that must be firing then (without `alertname`); () for none."""
    annotations: Mapping[str, str]


def unit_test_group(name: str, scrape_seconds: int, minutes: int, series: Iterable[Series],
               checks: Iterable[AlertCheck]) -> dict[str, Any]:
    """A unit-test group: the series sampled every scrape interval for `minutes`, and the alerts checked."""
    samples = minutes * 60 // scrape_seconds + 1
    return {
        "name": name, "interval": f"{scrape_seconds}s",
        "input_series": [{"series": s.selector(), "values": notation([s.shape(k * scrape_seconds / 60)
                                                                      for k in range(samples)])} for s in series],
        "alert_rule_test": [{"eval_time": f"{c.minute}m", "alertname": c.alert,
                             "exp_alerts": [{"exp_labels": dict(labels), "exp_annotations": dict(c.annotations)}
                                            for labels in c.firing]} for c in checks],
    }


def unit_test_file(rule_files: Sequence[str], evaluation_seconds: int, group_order: Sequence[str],
                   groups: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A `promtool test rules` file; `group_order`: the rule groups in the order they run at each evaluation (a
    group reading another's output runs after it, as the workspace's rules run on what the edge wrote)."""
    return {"rule_files": list(rule_files), "evaluation_interval": f"{evaluation_seconds}s",
            "group_eval_order": list(group_order), "tests": [dict(g) for g in groups]}
