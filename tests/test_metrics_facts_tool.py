"""tools/extract_metrics_facts.py reads the exporters' sources as they are written at the pinned tags, and what it
writes (components/catalog/facts/metrics_facts.json) is what components/catalog/metrics_facts.py exposes."""

from __future__ import annotations

import json
from pathlib import Path

from gpucluster.catalog import metrics_facts
from tools.extract_metrics_facts import (
    cpu_modes,
    csv_counters,
    dcgm_field_names,
    go_dcgm_commit,
    infiniband_metrics,
    write,
)
from tools.facts_home import FACTS

CSV = """# Format
# DCGM FIELD, Prometheus metric type, help message
DCGM_FI_DEV_SM_CLOCK,  gauge, SM clock frequency (in MHz).
# DCGM_FI_DEV_MEM_CLOCK, gauge, commented out
DCGM_FI_DEV_DEC_UTIL ,     gauge, Decoder utilization (in %).
DCGM_FI_DRIVER_VERSION,        label, Driver Version
"""

CPU = """
		ch <- prometheus.MustNewConstMetric(c.cpu, prometheus.CounterValue, cpuStat.User, cpuNum, "user")
		ch <- prometheus.MustNewConstMetric(c.cpu, prometheus.CounterValue, cpuStat.Steal, cpuNum, "steal")
			ch <- prometheus.MustNewConstMetric(c.cpuGuest, prometheus.CounterValue, cpuStat.Guest, cpuNum, "user")
"""

INFINIBAND = """
	descriptions := map[string]string{
		"link_downed_total":                          "Number of times the link failed",
		// a comment
		"state_id":                                   "State of the InfiniBand port",
	}

	other := map[string]string{"not_this": "x"}
"""


def test_csv_skips_comments_and_trims() -> None:
    assert csv_counters(CSV) == [("DCGM_FI_DEV_SM_CLOCK", "gauge"), ("DCGM_FI_DEV_DEC_UTIL", "gauge"),
                                 ("DCGM_FI_DRIVER_VERSION", "label")]


def test_go_dcgm_pseudo_version() -> None:
    assert go_dcgm_commit("\tgithub.com/NVIDIA/go-dcgm v0.0.0-20260422145128-ec245c09fe3e\n") == "ec245c09fe3e"


def test_field_names_from_the_go_map() -> None:
    text = '\t"DCGM_FI_UNKNOWN":   0,\n\t"DCGM_FI_DEV_GPU_UTIL":  203,\n\tDCGM_FI_NOT_QUOTED = 4\n'
    assert dcgm_field_names(text) == ["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_UNKNOWN"]


def test_cpu_modes_and_ports() -> None:
    assert cpu_modes(CPU) == (["user", "steal"], ["user"])
    assert infiniband_metrics(INFINIBAND) == ["link_downed_total", "state_id"]


def test_what_the_tool_writes_names_it_and_keeps_the_facts(tmp_path: Path) -> None:
    facts = {"NODE_CPU_MODES": ["user", "steal"], "DCGM_DEFAULT_COUNTERS": [("DCGM_FI_DEV_GPU_UTIL", "gauge")]}
    write(tmp_path / "facts.json", "tools/extract_metrics_facts.py", "the sources", facts)
    assert json.loads((tmp_path / "facts.json").read_text()) == {
        "generator": "tools/extract_metrics_facts.py", "sources": "the sources", "NODE_CPU_MODES": ["user", "steal"],
        "DCGM_DEFAULT_COUNTERS": [["DCGM_FI_DEV_GPU_UTIL", "gauge"]]}


def test_the_readers_expose_every_fact_of_their_json_as_tuples() -> None:
    from gpucluster.catalog import metrics_consumers

    for module, name in ((metrics_facts, "metrics_facts.json"), (metrics_consumers, "metrics_consumers.json")):
        document = json.loads((FACTS / name).read_text())
        facts = {key: value for key, value in document.items() if key not in ("generator", "sources")}
        exposed = {key: value for key, value in vars(module).items() if key.isupper() and not key.startswith("_")}
        assert list(exposed) == list(facts), name
        for key, value in facts.items():
            as_tuples = tuple(tuple(v) if isinstance(v, list) else v for v in value) if isinstance(value, list) else value
            assert exposed[key] == as_tuples and type(exposed[key]) is type(as_tuples), key
    assert len(metrics_facts.DCGM_EXPORTER_COMMIT) == 40 and len(metrics_facts.GO_DCGM_COMMIT) == 40
    assert metrics_facts.DCGM_DEFAULT_COUNTERS[0] == ("DCGM_FI_DEV_SM_CLOCK", "gauge")


def test_consumer_extraction_reads_go_as_written() -> None:
    from tools.extract_metrics_consumers import cobra_flags, constants, go_mod_version, kingpin_flags, sd_keys, yaml_keys

    assert yaml_keys('A string `yaml:"api_server,omitempty"`\n B X `yaml:",inline"`\n C Y `yaml:"-"`') == {"api_server"}
    assert kingpin_flags('metricsPath = kingpin.Flag(\n\t\t\t"web.telemetry-path",\n') == {"web.telemetry-path"}
    assert kingpin_flags('serverOnlyFlag(a, "storage.tsdb.path", "x")') == {"storage.tsdb.path"}
    assert cobra_flags('o.cmd.Flags().Int32Var(&o.Shard, "shard", int32(0), "x")') == {"shard"}
    assert constants('\tRolePod           Role = "pod"\n\tHashMod Action = "hashmod"', "Role") == ["pod"]
    assert go_mod_version("\tgithub.com/prometheus/common v0.70.1\n", "github.com/prometheus/common") == "v0.70.1"
    assert sd_keys('staticConfigsKey = "static_configs"\n registerConfig(config.Name()+"_sd_configs", ...)',
                   ["kubernetes"]) == {"static_configs", "kubernetes_sd_configs"}
