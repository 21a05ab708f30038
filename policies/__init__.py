"""The llm-serving CrossGuard policy pack and its plain-YAML manifest checker.

Rules live in importable modules (`policies.rules.*`) as plain functions over plain dicts, so the
Pulumi pack (`policies/__main__.py`), the manifest checker (`python -m policies.check`) and the
offline plan (`policies.check.check_objects`) all run exactly the same code.
"""
