"""The scenarios make e2e runs against the real programs."""
