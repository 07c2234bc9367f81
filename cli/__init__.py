"""``qm``: the portal's REST API on the command line (HTTP only: it imports no portal app)."""
