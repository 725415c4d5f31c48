"""Facts about Azure the planners rely on, each with its source. Stacks can override every one."""
