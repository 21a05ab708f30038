"""LeaderWorkerSet: one replica of a model whose tensor x pipeline parallelism spans nodes.

kubernetes-sigs/lws at tag v0.10.0. The chart is published as `oci://registry.k8s.io/lws/charts/lws`
with version `0.10.0` (the project's install docs, site/content/en/docs/installation/_index.md,
"Install by Helm"; the promotion to registry.k8s.io drops the tag's "v"). Its CRD carries a
conversion webhook served from namespace `lws-system`, so it is installed there, as the docs do.
Its admission webhooks (failurePolicy Fail, also for Pods) reject a LeaderWorkerSet until the
controller runs: the LeaderWorkerSet waits for the release, which waits for the controller.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from common import images
from components.addons.catalog import AddOn, Crd, HelmChart

# `pulumi.com/waitFor` for a LeaderWorkerSet: the controller sets condition Available (reason
# AllGroupsReady) once every group is ready and updated (api/leaderworkerset/v1/
# leaderworkerset_types.go, pkg/controllers/leaderworkerset_controller.go at v0.10.0).
READY = "condition=Available"


# The controller's image from the one table (common/images.py, "lws-controller"). The template
# writes "{repository}:{tag}" (charts/lws/templates/manager/deployment.yaml:48 at v0.10.0), so a
# tag of `v0.10.0@sha256:...` pins the digest. The values.yaml at the tag says `tag: main`; the
# published chart carries v0.10.0 (hack/push-chart.sh rewrites repository, tag and pullPolicy when
# it packages), which is what the table names, so setting it changes nothing until a digest is known.
IMAGE_KEY = "lws-controller"


def values(
    system_node_selector: Mapping[str, str] | None, image_mirrors: Mapping[str, str] | None = None
) -> dict[str, Any]:
    image = images.chart_image(IMAGE_KEY, dict(image_mirrors or {}))
    out: dict[str, Any] = {"image": {"manager": {"repository": image.name, "tag": image.pinned_tag}}}
    if system_node_selector:
        out["nodeSelector"] = dict(system_node_selector)
    return out


CHART = HelmChart(
    release="lws",
    chart="oci://registry.k8s.io/lws/charts/lws",
    version="0.10.0",
    namespace="lws-system",
    values_url="https://github.com/kubernetes-sigs/lws/blob/v0.10.0/charts/lws/values.yaml",
    values=values,
)

ADDON = AddOn(
    key="leaderWorkerSet",
    title="LeaderWorkerSet",
    version="v0.10.0",
    steps=(CHART,),
    crds=(Crd("leaderworkerset.x-k8s.io", "LeaderWorkerSet", "leaderworkersets"),),
    docs="A replica that spans nodes is one LeaderWorkerSet group (leader + workers), recreated as a whole.",
)
