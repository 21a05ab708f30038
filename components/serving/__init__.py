"""Serving (stages 5-9): the model servers and what keeps them observable.

Owns: `vllm` (Deployment or LeaderWorkerSet, Service, route, PDB), `kserve` (InferenceService),
`engine_args` (the `vllm serve` flags from the plan), `writable` (the emptyDirs a non-root vLLM
writes to on a read-only root), `probes` (budgets from the load estimate),
`resources` (pod requests and limits), and watching each model: `targets` (what its queries
select), `alerts` (availability, saturation), `slo` (latency SLO recording rules and burn-rate
alerts), `dashboard` (Grafana), `scaling` (KEDA/HPA on queue depth and KV-cache usage) and
`observability` (ServiceMonitor and PrometheusRule).
May import: `common`, `stack_config`, `planner`, `components.cluster`, `components.operators`,
`components.model_store`.
Imported by: `__main__.py`, the offline plan, the tests.
"""
