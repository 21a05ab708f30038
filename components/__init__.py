"""The Pulumi ComponentResources `__main__.py` wires, one package per stage of the serving path.

Owns, in the order the program builds them (and the order imports may flow): `cluster` (the
cluster contract, EKS, GKE, an existing cluster), `addons` (Prometheus Operator, KEDA,
LeaderWorkerSet, KServe, Gateway API and Inference Extension CRDs, cert-manager, agentgateway),
`operators` (NVIDIA GPU and Network Operators), `model_store` (the namespace, the volume and the
mirror Jobs), `serving` (vLLM or KServe servers with their probes, resources and observability) and
`entrance` (one Gateway, an InferencePool and endpoint picker per base model) and `network_policy`
(the serving namespace's NetworkPolicies, which name every stage's pods). A later stage may import
an earlier one, never the reverse.
May import: `common`, `stack_config`, `planner`.
Imported by: `__main__.py`, the offline plan, the tests.

`sizing.py`, `smoke.py` and `loadtest.py` here are only the documented command names
(`python -m components.sizing|smoke|loadtest`); the tools live in `planner` and `endpoint_tools`.
"""
