"""Fuzzing the command-line tools with hostile input (issue 15), shared by the properties in
tests/fuzz/ and the named regressions in tests/hostile/.

`harness` runs a tool's `main()` case after case in a worker process under a memory limit, with a
wall-clock limit per case, and classifies each outcome (exit code, traceback, hang, crash);
`fault_server` is an HTTP server on 127.0.0.1 that misbehaves on purpose for the smoke check and
the load sweep; `strategies` holds the hypothesis strategies; `figures` counts what a run tried and
found, for the report `make fuzz` prints.

Two sizes: `make test` runs a few examples per property (fast); `make fuzz` sets
LLM_SERVING_FUZZ_EXAMPLES and a seed (printed, replayable) for the long run.
"""
