"""The one entrance in front of every model (stage 10 of the serving path, after the servers).

May import: everything below it (serving for the servers' labels and drain allowance, addons for
`CrdSources`), `common`, `stack_config`. Imported by: `__main__.py` only.

- `picker`: the llm-d-router-gateway chart values of one base model (InferencePool + endpoint
  picker) and the pickers' PodDisruptionBudget.
- `routes`: the Gateway, the HTTPRoute from /v1 to the pools, the HTTP->HTTPS redirect.
- `body_routing`: the base model of the request body's `model`, as a header (agentgateway).
- `bbr`: the same on GKE: the Body-Based Router chart's values, one ConfigMap of adapters and
  aliases per base model, the router's PodDisruptionBudget.
- `tls`: the ACME Issuer behind the HTTPS certificate (cert-manager).
- `gke`: GKE's health check and backend timeout per pool.
- `entrance`: `Entrance`, the component that creates them.
"""

from components.entrance.entrance import Entrance, EntranceArgs

__all__ = ["Entrance", "EntranceArgs"]
