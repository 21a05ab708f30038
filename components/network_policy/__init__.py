"""The serving namespace's NetworkPolicies: deny every path, then open the ones the stack needs
(the entrance and pickers to the servers, Prometheus to metrics, a multi-node replica to itself,
the mirror Jobs out to the Hub and the bucket; docs/security.md, "Network and cluster API").

It reads every stage's pod labels and ports, so it sits above the entrance on the serving path.
May import: everything below it, `common`, `stack_config`. Imported by: `__main__.py` only.

- `rules`: the NetworkPolicy manifests from a `NetworkPolicySpec` (pure; the tests evaluate them).
- `policies`: the spec from the stack config and plans, and `ServingNetworkPolicies`, which creates them.
- `enforcement`: what enforces them (the cluster's dataplane), as the serving Namespace's annotation names it.
"""

from components.network_policy import enforcement
from components.network_policy.policies import ServingNetworkPolicies, network_policy_spec

__all__ = ["ServingNetworkPolicies", "enforcement", "network_policy_spec"]
