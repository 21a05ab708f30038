"""Benchmark: evaluate a stack serving 50 models under the mock runtime (target: under 10 s here).

    venv/bin/python benchmarks/plan_many_models.py [--models 50] [--repeat 3]
    venv/bin/python benchmarks/plan_many_models.py --quick     # 3 models, once: does it still run?

Not a test: timings depend on the machine. It builds the stack from the prod stack file with its
model list repeated under distinct names (each copy's aliases too: every name a client can ask for
must be distinct), runs the whole program (config, Hub metadata from the committed model-metadata/
folder, sizing, every component), then renders every Helm release of it with Helm's engine
(offline_plan/helm: one llm-d-router-gateway release per base model, and the add-ons), and reports
both wall times and peak memory. The shared entrance takes at most 16 base models (one HTTPRoute
rule each, stack_config/stack.py MAX_ROUTE_RULES), so a larger stack is planned without it and the
entrance is measured again at 16 models. `make test` runs it with
--quick (tests/repo/test_benchmarks.py), so a benchmark the program has outgrown fails there.
"""

from __future__ import annotations

import argparse
import copy
import json
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from offline_plan import helm
from offline_plan.mock_runtime import PROJECT, evaluate, stack_file_config
from stack_config.stack import MAX_ROUTE_RULES


def many_models_config(n: int, stack: str = "prod", entrance: bool = True) -> tuple[dict[str, str], list[str]]:
    config, secret_keys = stack_file_config(stack)
    if not entrance:
        exposure = json.loads(config.get(f"{PROJECT}:exposure", "{}"))
        exposure.pop("entrance", None)
        config[f"{PROJECT}:exposure"] = json.dumps(exposure)
    models = json.loads(config[f"{PROJECT}:models"])
    many = []
    for i in range(n):
        model = copy.deepcopy(models[i % len(models)])
        model["name"] = f"m{i}-{model.get('name') or model['repo'].split('/')[-1].lower().replace('.', '-')}"[
            :63
        ].rstrip("-")
        model.pop("replicas", None)
        if not entrance:
            model.pop("aliases", None)  # aliases are the entrance's rewrites
        elif i >= len(models):
            model["aliases"] = [f"{alias}-copy{i}" for alias in model.get("aliases", [])]
        many.append(model)
    config[f"{PROJECT}:models"] = json.dumps(many)
    # Room for every model's replicas, so the benchmark measures planning, not a capacity error.
    pools = json.loads(config[f"{PROJECT}:pools"])
    for pool in pools:
        pool["maxNodes"] = 4 * n
    config[f"{PROJECT}:pools"] = json.dumps(pools)
    # Secrets are set with the CLI, never in the stack file: stand in for them as the plan does.
    for key in ("hfToken", "apiKey"):
        config.setdefault(f"{PROJECT}:{key}", f"<secret {key} placeholder>")
        secret_keys.append(f"{PROJECT}:{key}")
    return config, secret_keys


def measure(models: int, entrance: bool, stack: str, repeat: int) -> None:
    config, secret_keys = many_models_config(models, stack, entrance)
    times, render_times = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        evaluation = evaluate(stack, config, secret_keys)
        times.append(time.perf_counter() - start)
        start = time.perf_counter()
        rendered = helm.rendered(evaluation)
        render_times.append(time.perf_counter() - start)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{models} models, stack {stack}, {'with' if entrance else 'without'} the shared entrance: "
        f"{len(evaluation.resources)} resources, {len(evaluation.kubernetes_objects)} Kubernetes objects"
    )
    print(
        f"evaluation wall time over {repeat} runs: min {min(times):.2f} s, "
        f"median {statistics.median(times):.2f} s, max {max(times):.2f} s; peak RSS {peak_mib:.0f} MiB"
    )
    print(
        f"Helm rendering of {len(rendered)} releases ({sum(len(r.objects) for r in rendered)} objects): "
        f"min {min(render_times):.2f} s, median {statistics.median(render_times):.2f} s, max {max(render_times):.2f} s"
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--stack", default="prod")
    parser.add_argument("--quick", action="store_true", help="3 models, one run: a check that it runs")
    args = parser.parse_args()
    if args.quick:
        args.models, args.repeat = 3, 1
    runs = [(args.models, args.models <= MAX_ROUTE_RULES)]
    if args.models > MAX_ROUTE_RULES:
        runs.append((MAX_ROUTE_RULES, True))
    for models, entrance in runs:
        measure(models, entrance, args.stack, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
