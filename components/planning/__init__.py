"""Pure planners: spec in, frozen plans out. Nothing here imports pulumi."""
