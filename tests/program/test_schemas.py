"""The schema validator every emitted-object test relies on rejects what the API server would."""

from __future__ import annotations

import copy

import pytest

from tests.support.schemas import SchemaError, validate_object

DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web"},
    "spec": {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
        },
    },
}
POD_MONITOR = {
    "apiVersion": "monitoring.coreos.com/v1",
    "kind": "PodMonitor",
    "metadata": {"name": "m"},
    "spec": {"selector": {"matchLabels": {"app": "web"}}, "podMetricsEndpoints": [{"port": "http"}]},
}


def test_valid_objects_pass():
    validate_object(DEPLOYMENT)
    validate_object(POD_MONITOR)


def _with(obj, path, value):
    obj = copy.deepcopy(obj)
    node = obj
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return obj


@pytest.mark.parametrize(
    "obj, message",
    [
        (_with(DEPLOYMENT, ["spec", "template", "spec", "containers", 0, "resource"], {}), "Deployment/web"),
        (_with(DEPLOYMENT, ["spec", "replicas"], "two"), "Deployment/web"),
        (
            _with(POD_MONITOR, ["spec", "podMetricsEndpoints", 0, "portt"], "http"),
            "PodMonitor/m: spec.podMetricsEndpoints.0",
        ),
        (
            {
                "apiVersion": "serving.kserve.io/v1beta1",
                "kind": "InferenceService",
                "metadata": {"name": "i"},
                "spec": {"predictor": {"modle": {}}},
            },
            "InferenceService/i: spec.predictor",
        ),
        (
            {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}},
            "no CRD schema for example.com/v1",
        ),
    ],
)
def test_unknown_fields_wrong_types_and_unknown_kinds_are_rejected(obj, message):
    with pytest.raises(SchemaError, match=message):
        validate_object(obj)
