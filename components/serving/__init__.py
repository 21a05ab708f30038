"""Serving (stages 5-9): the model servers and what keeps them observable.

Owns: `vllm` (Deployment or LeaderWorkerSet, Service, route, PDB), `kserve` (InferenceService),
`engine_args` (the `vllm serve` flags from the plan), `probes` (budgets from the load estimate),
`resources` (pod requests and limits) and `observability` (ServiceMonitor, alerts, dashboard,
autoscaling on queue depth).
May import: `common`, `stack_config`, `planner`, `components.cluster`, `components.operators`,
`components.model_store`.
Imported by: `__main__.py`, the offline plan, the tests.
"""
