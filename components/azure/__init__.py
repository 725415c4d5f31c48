"""Pulumi components for Azure: they turn plans into resources and decide nothing themselves.

Node scale sets live in scale_set/ (its __init__ lists the modules); the rest is one module per resource family.
"""

import sys

from gpucluster.azure.scale_set import provider as _scale_set_provider

# Pulumi pickles the node scale sets' provider into every scale set's state by reference, under the path it had
# before it moved into scale_set/: `<package>.azure.scale_set_provider.ScaleSetProvider`, the class's `__module__`.
# The dynamic-provider host imports the path for every RPC (pickle looks it up in sys.modules, dill as an attribute
# of this package): it stays importable as this alias of the module, with no file at the old path. State written
# while the import name was `components` loads too where components/ is importable, the project's folder, as this
# package runs there under that name as well. tests/test_provider_state.py loads a state written then.
scale_set_provider = _scale_set_provider
sys.modules[f"{__name__}.scale_set_provider"] = _scale_set_provider
