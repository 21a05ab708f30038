"""The offline plan (`make plan`): the real program under the Pulumi SDK's mock runtime.

Owns: `mock_runtime` (mocks that record every resource, its parent and its dependencies; the
stack file read as the CLI reads it; reads answered, and a missing CRD failed, as the engine does),
`waits` (the longest chain of waits one `pulumi up` may block on), `write` (manifests, plan.md, policy verdicts; run as
`python -m offline_plan`) and `config_reference` (the README's generated config and policy tables).
May import: everything; it evaluates the whole program and runs the policy pack over it.
Imported by: the tests and the benchmarks only.
"""
