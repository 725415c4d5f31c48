"""The node agents: standalone programs (standard library only) that run in the cluster from the agents image, and the
build context of that image (Dockerfile beside them). The library renders their objects (components/kubernetes/objects/)
and builds the image from this folder (components/planning/agents_image.py)."""
