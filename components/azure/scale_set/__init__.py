"""Node scale sets, in one place (as Cluster API Provider Azure keeps azure/services/scalesets/, read at
kubernetes-sigs/cluster-api-provider-azure 7ea3b92d):

- pool.py: NodePool, the component of one pool: a scale set per InfiniBand domain or rack, the rack's interconnect
  groups and blocks, a confidential pool's disk key;
- body.py: a scale set's inputs built from the plan (azure-native's camelCase shape; boot document, NICs, disks);
- resource.py: NodeScaleSet, the Pulumi dynamic resource those inputs declare;
- provider.py: ScaleSetProvider, its create/read/update/delete/diff through Microsoft's SDK (Pulumi state names it
  as gpucluster.azure.scale_set_provider, kept importable for that: components/azure/__init__.py);
- arm_client.py: how the SDK providers reach ARM (credentials never in the state), shared with interconnect blocks;
- wire.py: the declared shape to ARM's wire body and back, by the SDK's models;
- routes.py: the api-version, what replaces and what an update never sends (CREATE_ONLY_PATHS, ROUTE_REPLACES);
- replacement_guard.py: at most one InfiniBand domain of a pool replaced per deployment, refused in the provider's diff;
- update_schema.py: Microsoft.Compute's 2026-07-02 update definitions CREATE_ONLY_PATHS is derived against.

Beside it: interconnect blocks (interconnect_block*.py) and ScaleSetsReady (scale_sets_ready*.py), the one wait per
cluster for every scale set's allocation. docs/architecture.md, "Node scale sets", has the why.
"""
