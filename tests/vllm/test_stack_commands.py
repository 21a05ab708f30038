"""Finding `vllm serve` command lines in generated manifests (no server needed)."""

from __future__ import annotations

import textwrap

from tests.support.stack_commands import collect_metric_reference_files, collect_vllm_serve_argv, swap_model

DEPLOYMENT = textwrap.dedent("""\
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: llama}
    spec:
      template:
        spec:
          initContainers:
            - {name: fetch, image: busybox, command: [sh, -c, "true"]}
          containers:
            - name: vllm
              image: vllm/vllm-openai:v0.32.0
              command: [vllm, serve]
              args: [/models/llama, --max-model-len, "8192"]
            - {name: sidecar, image: busybox, args: [sleep, "1"]}
    ---
    apiVersion: serving.kserve.io/v1alpha1
    kind: ServingRuntime
    metadata: {name: rt}
    spec:
      containers:
        - {name: kserve-container, image: vllm/vllm-openai:v0.32.0, args: [--model, /models/x, --port, "8080"]}
    """)


def test_collects_serve_lines_from_commands_and_image_entrypoints(tmp_path):
    manifests = tmp_path / "dev" / "manifests"
    manifests.mkdir(parents=True)
    (manifests / "server.yaml").write_text(DEPLOYMENT)
    found = dict(collect_vllm_serve_argv("/tiny", build=tmp_path))
    assert found == {
        "dev/manifests/server.yaml:Deployment/llama/vllm": ["/tiny", "--max-model-len", "8192"],
        "dev/manifests/server.yaml:ServingRuntime/rt/kserve-container": ["--model", "/tiny", "--port", "8080"],
    }
    assert collect_metric_reference_files(build=tmp_path) == [manifests / "server.yaml"]


def test_no_build_directory_means_no_lines(tmp_path):
    assert collect_vllm_serve_argv("/tiny", build=tmp_path / "absent") == []


def test_swap_model_keeps_flags():
    assert swap_model(["--model=/m", "--port", "1"], "/t") == ["--model=/t", "--port", "1"]
    assert swap_model(["--port", "1"], "/t") == ["--port", "1"]


def test_promql_is_collected_from_rules_triggers_isvc_metrics_and_dashboards():
    import json

    from tests.support.stack_commands import promql_in_object

    objects = [
        {
            "kind": "PrometheusRule",
            "spec": {"groups": [{"rules": [{"record": "r", "expr": "a"}, {"alert": "A", "expr": "b > 1"}]}]},
        },
        {
            "kind": "ScaledObject",
            "spec": {
                "triggers": [
                    {"type": "prometheus", "metadata": {"query": "sum(c)"}},
                    {"type": "cpu", "metadata": {"value": "50"}},
                ]
            },
        },
        {
            "kind": "InferenceService",
            "spec": {
                "predictor": {
                    "autoScaling": {"metrics": [{"type": "External", "external": {"metric": {"query": "sum(d)"}}}]}
                }
            },
        },
        {
            "kind": "ConfigMap",
            "metadata": {"labels": {"grafana_dashboard": "1"}},
            "data": {"x.json": json.dumps({"panels": [{"targets": [{"expr": "e"}]}]})},
        },
        {"kind": "ConfigMap", "metadata": {"labels": {}}, "data": {"x.json": "{}"}},
    ]
    assert [e for o in objects for e in promql_in_object(o)] == ["a", "b > 1", "sum(c)", "sum(d)", "e"]
