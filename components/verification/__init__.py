"""The verification Job: after the servers and the entrance, the stack checks itself (issue 18).

May import: everything below it on the serving path (`planner` for `ModelPlan`), `common`. Imported
by: `__main__.py` only. It never imports `endpoint_tools` (import-linter): it ships their source,
read as text, to the Job in a ConfigMap, so the Job runs exactly the code `python -m
components.smoke` runs.

- `tools`: which files of the endpoint tools the Job needs, read as text.
- `job`: the targets file from the plan, the time budget, the Job and its ConfigMap
  (`Verification`), and the stack output's summary.
"""

from components.verification.job import Verification, VerificationArgs, VerificationTarget

__all__ = ["Verification", "VerificationArgs", "VerificationTarget"]
