"""YAML a person or another tool hands over, read within limits (stack files, manifests).

Owns: `bounded` -- libyaml's safe loader (PyYAML's pure-Python one only where libyaml is missing),
with caps on nesting depth and on what aliases expand to (alias bombs, recursive aliases, merge-key
bombs), checked on the parser's events before any value is built; optional refusal of keys given
twice; every failure one line with the file and line. `go_reading` -- the values PyYAML and Go's YAML
(what kubectl and the API server decode with) would read differently, so the manifest checker can
refuse them with their line.
May import: `common` (the shared limits in `common.untrusted`) and PyYAML.
Imported by: the offline plan (the stack-file reader) and the policy checker; never by the program,
which gets its config from the Pulumi CLI.
"""

from safe_yaml.bounded import YamlInputError, load_all, load_one

__all__ = ["YamlInputError", "load_all", "load_one"]
