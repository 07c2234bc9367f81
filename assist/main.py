"""The ``qm-mcp`` console script: the server, or how to install the SDK it runs on."""

from __future__ import annotations

import sys


def main() -> int:
    try:
        # lazy: the MCP SDK is an optional extra; without it, say how to install it.
        from assist.server import main as serve
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in ("mcp", "mcp_types", "pydantic"):
            raise
        print(
            "qm-mcp: the MCP SDK is not installed: pip install 'quartermaster[mcp]'",
            file=sys.stderr,
        )
        return 2
    return serve()
