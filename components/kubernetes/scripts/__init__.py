"""The project's agents (stdlib only), shipped as the agents image built from images/agents/Dockerfile."""
