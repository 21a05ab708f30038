"""The endpoint tools: check and load any OpenAI-compatible endpoint after `pulumi up`.

Owns: `smoke` (health, models, a completion, streaming, the context limit, the metrics, and with
`--expect-kv-tokens` the allocated KV cache against a prediction, read by `kv_capacity`), `verify`
(the stack's verification Job: smoke for every model from a targets file) and `loadtest` (a
concurrency sweep with TTFT/ITL percentiles), with their stdlib HTTP client (`openai_client`),
request distributions, prompt corpus and report tables.
May import: `common` and the standard library only, so the tools run anywhere Python does.
Imported by: nothing in the program; `components/smoke.py` and `components/loadtest.py` keep the
documented `python -m components.smoke|loadtest` names.
"""
