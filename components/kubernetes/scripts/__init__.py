"""Scripts shipped into the cluster in ConfigMaps (stdlib only, so a stock Python image runs them)."""
