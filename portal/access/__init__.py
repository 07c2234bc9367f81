"""Who may do what: permissions and roles, API tokens, sign-in guards."""
