"""One KServeModel component run alone under the mock runtime, and the objects it asks the cluster for."""

from __future__ import annotations

import pulumi

from components.cluster.interface import ModelBucket, ServiceAccountBinding
from components.serving import kserve
from offline_plan.mock_runtime import run_in_mocks
from tests.support.addon_fixtures import crds_present
from tests.support.model_plans import machine, make_plan, placement
from tests.support.unwrap import unwrap_secrets

NAMESPACE = "llm-serving"


TOKEN = "hf_test_not_a_real_token_5d1c"


BASELINE = "fedcba9876543210fedcba9876543210fedcba98"


def s3_bucket() -> ModelBucket:
    return ModelBucket(
        scheme="s3",
        name="team-models",
        prefix="models",
        writer=ServiceAccountBinding(NAMESPACE, "model-mirror"),
        reader=ServiceAccountBinding(NAMESPACE, "model-reader"),
    )


def evaluate(
    model: dict, *, storage: str = "bucket", bucket: ModelBucket | None = None, token: str | None = TOKEN, **extra
):
    p = make_plan({"engine": "kserve", **model})

    def program():
        # Keys are given as plain strings and become Pulumi secrets here, inside the mocked run.
        keys = {k: pulumi.Output.secret(extra[k]) for k in ("api_key", "api_key_next") if extra.get(k)}
        kserve.KServeModel(
            "m",
            kserve.KServeModelArgs(
                plan=p,
                placement=placement(p),
                namespace=NAMESPACE,
                storage=storage,
                crds=crds_present(),
                bucket=bucket if bucket is not None else (s3_bucket() if storage == "bucket" else None),
                reader_service_account="model-reader",
                machine=machine(p),
                hf_token=pulumi.Output.secret(token) if token else None,
                **{**extra, **keys},
            ),
        )

    ev = run_in_mocks(program)
    return p, ev


def objects(ev, kind: str | None = None) -> list[dict]:
    objs = [unwrap_secrets(r.inputs) for r in ev.resources if r.is_kubernetes_object]
    return [o for o in objs if kind is None or o["kind"] == kind]
