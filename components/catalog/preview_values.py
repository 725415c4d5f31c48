"""What a preview holds where a value is not known yet: the Pulumi SDK's unknown sentinel (pulumi
`sdk/python/lib/pulumi/runtime/rpc.py` UNKNOWN, the value an unresolved output carries in serialized inputs) and the
mark the offline engine writes in its place in preview.json. The offline engine produces them; the ARM preflight and
the policy runner read them, so they sit below both."""

from __future__ import annotations

UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
UNKNOWN_MARK = "[unknown]"
