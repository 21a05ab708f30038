"""One VllmServer component run alone under the mock runtime, from a real plan of a committed model config."""

from __future__ import annotations

import pulumi

from components.serving.vllm import ServerStorage, VllmServer, VllmServerArgs
from offline_plan.mock_runtime import run_in_mocks
from tests.support.addon_fixtures import crds_present
from tests.support.model_plans import machine, make_plan, placement

API_KEY_VALUE = "sk-test-not-a-real-key-93f1"


NAMESPACE = "llm-serving"


def evaluate(
    model: dict,
    *,
    api_key: str | None = API_KEY_VALUE,
    storage: ServerStorage | None = None,
    has_chat_template: bool = True,
    **extra,
):
    p = make_plan(model, has_chat_template=has_chat_template)
    resolved: dict = {}

    def program():
        server = VllmServer(
            "srv",
            VllmServerArgs(
                plan=p,
                placement=placement(p),
                namespace=NAMESPACE,
                crds=crds_present(),
                storage=storage or ServerStorage(claim_name="models-rwx", service_account="model-reader"),
                machine=machine(p),
                api_key=pulumi.Output.secret(api_key) if api_key else None,
                **extra,
            ),
        )
        resolved["server"] = server
        server.endpoint.apply(lambda v: resolved.__setitem__("endpoint", v))
        server.internal_endpoint.apply(lambda v: resolved.__setitem__("internal_endpoint", v))

    ev = run_in_mocks(program)
    ev.server = resolved  # the component and its resolved endpoints, for the tests that read them
    return p, ev, ev.kubernetes_objects
