"""The first `pulumi up`, simulated from the plan and the in-cluster objects it renders: where every workload of the
layer can land and in what order (bring_up_layer.py over engine.py), the Helm releases at the stack's size, the node
agents' API load. Above the in-cluster objects: it reads what they render; the planners never import it."""
