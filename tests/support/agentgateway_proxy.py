"""agentgateway's proxy for each of the stack's Gateways, rendered by Helm's engine as the
controller renders it.

The proxy is no chart the program installs: agentgateway's controller writes it per Gateway from a
Helm chart embedded in its binary (agentgateway/agentgateway v1.4.1, controller/pkg/helm/embed.go
and controller/pkg/helm/agentgateway/, copied unchanged into fixtures/helm/agentgateway-proxy-v1.4.1;
fixtures/SOURCES.md). Its deployer renders that chart with the Gateway's namespace and name as the
release (controller/pkg/deployer/deployer.go RenderManifest) and the values below, each from
controller/pkg/deployer/agentgateway_parameters.go `getDefaultAgentgatewayHelmValues` at the tag:

- `name`, `gatewayClassName`: the Gateway's; `gatewayAnnotations`/`gatewayLabels`: its
  `spec.infrastructure` ones;
- `ports`: one per listener port, named `listener~<port>` sanitised to `listener-<port>`, TCP
  (values_helpers.go GetPortsValues, AppendPortValue, SanitizePortName);
- `xds`: host `<AGW_XDS_SERVICE_NAME>.<controller namespace>.svc.cluster.local`, port
  `AGW_AGENTGATEWAY_XDS_SERVICE_PORT`, TLS when `AGW_XDS_MODE` is `tls` (controller/pkg/controller/
  start.go Build; api/settings/settings.go IsXdsTLSEnabled), all read here from the env of the
  controller Deployment the agentgateway chart renders, i.e. what the controller really runs with;
- `image`: `AGW_PROXY_IMAGE_REGISTRY`/`AGW_PROXY_IMAGE_REPOSITORY` from the same env, tag the
  controller's version; `sessionKeySecretName` `<gateway>-session-key` (applyManagedSessionKeyDefaults).

The CA certificate the controller injects for xDS TLS is a Secret's content, unknown offline: a
marker stands in for it (it only fills the proxy's CA ConfigMap).
"""

from __future__ import annotations

from typing import Any

import helm_python

from components.addons import agentgateway
from offline_plan.helm import RenderedRelease, documents
from tests.support.paths import FIXTURES

CHART_DIR = FIXTURES / "helm" / f"agentgateway-proxy-{agentgateway.VERSION}"
CONTROLLER_CLASS = "agentgateway"
CA_MARKER = "<xDS CA certificate from the controller's TLS Secret>"


def _controller_env(controller: RenderedRelease) -> dict[str, str]:
    for obj in controller.objects:
        if obj.get("kind") != "Deployment":
            continue
        for container in obj["spec"]["template"]["spec"]["containers"]:
            env = {e["name"]: str(e["value"]) for e in container.get("env") or [] if "value" in e}
            if "AGW_XDS_SERVICE_NAME" in env:
                return env
    raise ValueError("the agentgateway chart renders no controller Deployment with AGW_XDS_SERVICE_NAME")


def _port_name(port: int) -> str:
    # GenerateListenerNameFromPort, then SanitizePortName: runs of other characters become "-".
    return f"listener-{port}"


def values(gateway: dict[str, Any], controller: RenderedRelease) -> dict[str, Any]:
    env = _controller_env(controller)
    spec = gateway["spec"]
    infra = spec.get("infrastructure") or {}
    ports = sorted({int(listener["port"]) for listener in spec.get("listeners") or []})
    name = gateway["metadata"]["name"]
    xds_host = f"{env['AGW_XDS_SERVICE_NAME']}.{controller.release.namespace}.svc.cluster.local"
    return {
        "agentgateway": {
            "name": name,
            "gatewayClassName": spec["gatewayClassName"],
            "gatewayAnnotations": dict(infra.get("annotations") or {}),
            "gatewayLabels": dict(infra.get("labels") or {}),
            "ports": [{"port": p, "targetPort": p, "name": _port_name(p), "protocol": "TCP"} for p in ports],
            "service": {},
            "xds": {
                "host": xds_host,
                "port": int(env["AGW_AGENTGATEWAY_XDS_SERVICE_PORT"]),
                "tls": {"enabled": env.get("AGW_XDS_MODE") == "tls", "caCert": CA_MARKER},
            },
            "image": {
                "registry": env["AGW_PROXY_IMAGE_REGISTRY"],
                "repository": env["AGW_PROXY_IMAGE_REPOSITORY"],
                "tag": agentgateway.VERSION,
            },
            "sessionKeySecretName": f"{name}-session-key",
        }
    }


def proxy_objects(gateway: dict[str, Any], controller: RenderedRelease) -> list[dict[str, Any]]:
    """What the controller creates for `gateway`: the proxy Deployment, its LoadBalancer Service,
    ConfigMaps and ServiceAccount, in the Gateway's namespace."""
    chart = helm_python.Chart.load(CHART_DIR)
    namespace = gateway["metadata"]["namespace"]
    rendered = chart.render(
        values(gateway, controller), name=gateway["metadata"]["name"], namespace=namespace, is_install=True
    )
    objects = []
    for template, text in sorted(rendered.items()):
        if template.endswith(".yaml"):
            for obj in documents.objects(text):
                # The deployer sets every object's namespace to the release's (RenderChartToObjects).
                obj.setdefault("metadata", {})["namespace"] = namespace
                objects.append(obj)
    return objects


def gateways_of_class(objects: list[dict[str, Any]], gateway_class: str = CONTROLLER_CLASS) -> list[dict[str, Any]]:
    return [o for o in objects if o.get("kind") == "Gateway" and o["spec"].get("gatewayClassName") == gateway_class]
