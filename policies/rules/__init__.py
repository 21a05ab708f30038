"""Rule functions grouped by concern. Each takes a plain object dict (camelCase, as in YAML) and
the policy's config, and returns a list of `Finding`s (violation messages)."""
