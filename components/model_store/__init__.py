"""The model store (stage 3): pinned weights mirrored once, verified, and mounted by every server.

Owns: `store` (the serving namespace, its service accounts, and per model the volume and the
mirror Job) and `mirror/` (the script the Job runs, shipped in a ConfigMap).
May import: `common`, `stack_config`, `planner`, `components.cluster`.
Imported by: serving, `__main__.py`.
"""
