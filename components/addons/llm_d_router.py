"""llm-d-router's CRDs: InferenceModelRewrite (and InferenceObjective), group llm-d.ai.

llm-d/llm-d-router at tag v0.10.0 (commit 71f4f099). Its release assets are built by `make
artifacts` (Makefile:371-379 at the tag: `kubectl kustomize config/crd`, keeping the CRDs of group
llm-d.ai, into `manifests.yaml`) and uploaded to the GitHub release by .github/workflows/
ci-release.yaml:77-94. The two CRDs are the project's fixtures (tests/fixtures/crds, copied from
config/crd/bases at the tag).

Why the entrance installs them even when no alias needs a rewrite: the endpoint picker looks for
these kinds once, when it starts (pkg/epp/server/controller_config.go:59-87, discovery), and watches
only what it found; CRDs installed after the pickers started would be ignored until they restart.
With the CRDs first, an alias added later (`models[].aliases`) is picked up live.
"""

from __future__ import annotations

from common.facts import Fact
from components.addons.catalog import AddOn, Crd, Manifests

VERSION = "v0.10.0"
GROUP = "llm-d.ai"
MANIFESTS = Manifests(
    name="llm-d-router-crds",
    url=f"https://github.com/llm-d/llm-d-router/releases/download/{VERSION}/manifests.yaml",
    version=VERSION,
)
PUBLISHED = Fact(
    subject=f"release asset {MANIFESTS.url}",
    value=VERSION,
    source=f"llm-d/llm-d-router@{VERSION}:Makefile:371-379 and .github/workflows/ci-release.yaml:77-94",
    established=False,
    resolve_with=f"curl -fsSLI {MANIFESTS.url}",
)

ADDON = AddOn(
    key="llmdRouter",
    title="llm-d-router CRDs (InferenceModelRewrite, InferenceObjective)",
    version=VERSION,
    steps=(MANIFESTS,),
    crds=(
        Crd(GROUP, "InferenceModelRewrite", "inferencemodelrewrites"),
        Crd(GROUP, "InferenceObjective", "inferenceobjectives"),
    ),
    docs="The endpoint pickers rewrite model aliases (InferenceModelRewrite) to the served names.",
)
