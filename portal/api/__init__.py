"""The REST API's edge: routes, parsers, safety, schema, filters, errors."""
