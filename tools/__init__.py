"""Scripts run by hand or by make, never by the plan: what they write is committed and checked by tests.

What they extract from upstream sources goes to one home, components/catalog/facts/ (facts_home.py), as JSON naming
the tool that wrote it (tests/test_generated_facts.py).

- Extracting consumers' facts from their sources at the pinned tags (`fetch`ed repositories, wheels):
  extract_consumer_facts.py and consumer_facts/ (flags, chart values keys, RBAC), extract_metrics_facts.py and
  extract_metrics_consumers.py (exporters, Prometheus), dcgm_output.py (DCGM's JSON), acr_task_keys.py (ACR Tasks
  YAML), az_cli_args.py (the azure-cli options the plan renders), pulumi_engine_facts.py (pulumi's engine lines),
  gpu_operator_operands.py (the GPU operator's operand pod labels and ports).
- Regenerating checked outputs: golden.py (tests/golden/stacks.json), config_reference.py (docs/configuration.md's
  key reference), metrics_doc.py (docs/metrics.md's budget), render_report.py (docs/report-prod.png).
  config_reference.py and metrics_doc.py share generated_section.py (replace the text between two markers).
- Data: refresh_prices.py (the price catalogue from saved Retail Prices API answers).
- Checking pins: pin_versions.py (is each pinned consumer version the newest patch of its line, asked of the Go
  module proxy; components/catalog/facts/pin_versions.json).
- Day two: etcd_certs.py (push an etcd member's certificates to its VM).
"""
