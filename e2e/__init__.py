"""make e2e: the programs the project renders for, built at the pinned versions and run for real (docs/consumer-checks.md)."""
