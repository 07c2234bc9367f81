"""``qm-mcp``: the portal's REST API as read-only tools for an assistant (the Model Context
Protocol over stdio; HTTP only, like ``qm``: it imports no portal app)."""
