"""out/e2e/report.json: each consumer with its version and how it was built, each scenario with its result, and what
was applied and refused. Scenarios record themselves through the `report` fixture (e2e/tests/conftest.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from e2e.consumers import CONSUMERS, NOT_BUILT, install_dir

REPORT = Path(__file__).resolve().parent.parent / "out" / "e2e" / "report.json"


@dataclass
class E2EReport:
    scenarios: dict[str, dict[str, object]] = field(default_factory=dict)
    applied: dict[str, list[str]] = field(default_factory=dict)
    refused: dict[str, list[str]] = field(default_factory=dict)
    measured: dict[str, object] = field(default_factory=dict)

    def scenario(self, name: str, result: str, **facts: object) -> None:
        self.scenarios[name] = {"result": result, **facts}

    def document(self) -> dict[str, object]:
        consumers = {}
        for c in CONSUMERS:
            record = install_dir(c) / "build.json"
            built = json.loads(record.read_text()) if record.exists() else None
            consumers[c.name] = {"version": c.version, "pin": c.pin, "commit": c.commit,
                                 "built": built is not None,
                                 **({"how": built["how"], "go": built["go"], "reports": built["reports"]}
                                    if built else {})}
        return {"consumers": consumers,
                "not_built": NOT_BUILT,
                "scenarios": dict(sorted(self.scenarios.items())),
                "applied": self.applied, "refused": self.refused, "measured": self.measured}

    def write(self, path: Path = REPORT) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.document(), indent=2, sort_keys=True) + "\n")
