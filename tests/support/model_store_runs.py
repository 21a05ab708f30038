"""The model store run alone under the mock runtime: a serving namespace and its ModelStores, on an S3 or a GCS
bucket."""

from __future__ import annotations

from components.cluster.interface import ModelBucket, ServiceAccountBinding
from components.model_store import store as ms
from offline_plan import mock_runtime
from planner.plan import model_path

REPO = "meta-llama/Llama-3.1-8B-Instruct"


REV = "0e9e39f249a16976918f6564b8830bc894c89659"


# Llama-3.1-8B-Instruct's safetensors total (model.safetensors.index.json metadata.total_size).
LLAMA_8B_BYTES = 16_060_522_496


TOKEN = "hf_TESTtokenNeverInPlainText0123456789"


NAMESPACE = "llm-serving"


def aws_bucket() -> ModelBucket:
    return ModelBucket(
        scheme="s3",
        name="llm-serving-dev-models",
        prefix="models",
        writer=ServiceAccountBinding(
            NAMESPACE, "model-writer", {"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/writer"}
        ),
        reader=ServiceAccountBinding(
            NAMESPACE, "model-reader", {"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/reader"}
        ),
        region="us-east-1",
    )


def gcs_bucket() -> ModelBucket:
    return ModelBucket(
        scheme="gs",
        name="llm-serving-dev-models",
        prefix="models",
        writer=ServiceAccountBinding(
            NAMESPACE, "model-writer", {"iam.gke.io/gcp-service-account": "w@p.iam.gserviceaccount.com"}
        ),
        reader=ServiceAccountBinding(
            NAMESPACE, "model-reader", {"iam.gke.io/gcp-service-account": "r@p.iam.gserviceaccount.com"}
        ),
    )


def evaluate(bucket: ModelBucket | None = None, stores: list[dict] | None = None):
    """Run a namespace plus one ModelStore per entry of `stores` (ModelStoreArgs overrides)."""
    created: dict[str, ms.ModelStore] = {}

    def program():
        shared = ms.ServingNamespace("serving", ms.ServingNamespaceArgs(NAMESPACE, bucket))
        for i, overrides in enumerate(stores or [{}]):
            fields = {
                "repo": REPO,
                "revision": REV,
                "served_name": "llama-3-1-8b-instruct",
                "weights_bytes": LLAMA_8B_BYTES,
                "model_path": model_path(REPO, REV),
                "namespace": shared.namespace,
                "writer_service_account": shared.writer_service_account,
                "reader_service_account": shared.reader_service_account,
                "downloader_image": "vllm/vllm-openai:v0.32.0",
                "storage_class": "efs-sc",
                "bucket": bucket,
            }
            fields.update(overrides)
            created[fields["served_name"]] = ms.ModelStore(f"store-{i}", ms.ModelStoreArgs(**fields))

    evaluation = mock_runtime.run_in_mocks(program)
    return evaluation, created


def objects(evaluation, kind: str) -> list[dict]:
    return [o for o in evaluation.kubernetes_objects if o["kind"] == kind]


def only(evaluation, kind: str) -> dict:
    found = objects(evaluation, kind)
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]
