"""The built-in rules, one YAML file per rule (installed as the package ``tracedoc.builtin_rules``)."""
