"""The plan's report: its data (summary.json, `report_data`), the terminal summary and report.html, one module per
section or medium."""
