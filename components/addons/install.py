"""AddOns: install the add-ons a stack needs on a cluster it creates, or look them up on one it does not.

Created cluster: one Helm release per chart (pinned, atomic, awaited), each add-on's steps in
order, an add-on's `requires` first; custom resources wait for the add-on's last step.

Existing cluster: nothing is installed. Each CRD the stack's objects use is read with
`CustomResourceDefinition.get`. The engine runs reads during `pulumi preview` (pulumi/pulumi
pkg/resource/deploy/step.go, ReadStep.Apply: "Unlike most steps, Read steps run during
previews"); when the provider finds no such CRD it answers with no object (pulumi-kubernetes
provider/pkg/provider/provider.go Read: a 404 returns `deleteResponse`), and the engine fails the
step with "resource '<crd name>' does not exist". Python cannot catch that error, so the message
the person sees has to be carried by the read resource's own name: the CLI prints each failed
resource's diagnostics under "<type> (<name>):" (pkg/backend/display/progress.go, resourceHeader).
The name therefore names the add-on and the command that installs it; docs/addons.md shows the
output.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

import pulumi
import pulumi_kubernetes as k8s

from common import pod_security
from components.addons.catalog import AddOn, CloudFeature, Crd, HelmChart, Manifests
from components.addons.crd_sources import CrdSources
from components.addons.needs import AddOnNeed, install_commands

# Helm waits this long for an add-on's Deployments (and CRDs) to be ready, per phase (pre-install
# hooks, the release's objects, post-install hooks). Images come from public registries onto the
# system nodes; the charts' own docs use 300 s (lws `helm install --wait --timeout 300s`), doubled
# for a cold node pulling every image at once, as for the NVIDIA operators.
HELM_TIMEOUT_SECONDS = 600


def lookup_name(addon: AddOn, crd: Crd) -> str:
    """The read resource's name: what `pulumi preview` prints above "resource '<crd>' does not exist"."""
    return (
        f"{crd.name}, from {addon.title} {addon.version} listed in addons.preinstalled; "
        f"if missing, install it: {' && '.join(install_commands(addon))}"
    )


@dataclass
class AddOnsArgs:
    needs: Sequence[AddOnNeed]
    creates_cluster: bool
    system_node_selector: Mapping[str, str] | None = None
    """Node labels of the untainted system pool of a created cluster; add-on pods are pinned there."""
    image_mirrors: Mapping[str, str] = field(default_factory=dict)
    """images.pullThrough: upstream registry -> the cluster's cache for it (Cluster.image_mirrors); the
    charts' image values are rewritten through it (common/images.py chart_image)."""
    psa_version: str = pod_security.PSA_VERSION
    """The Pod Security policy version the add-ons' namespaces pin: the cluster's minor version."""


class AddOns(pulumi.ComponentResource):
    """The add-ons of one stack and `crds`, the kind -> source map every custom resource waits on."""

    crds: CrdSources
    values: dict[str, dict]
    """Helm values per release name (what the tests check against the charts' values.yaml)."""
    ready: dict[str, list[pulumi.Resource]]
    """Per add-on key: what its custom resources (and dependent add-ons) wait for."""

    def __init__(self, name: str, args: AddOnsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:k8s:AddOns", name, None, opts)
        # Children do not inherit a component's depends_on (the cluster layer); pass it on.
        after = opts.depends_on if opts else None
        # A single value is one dependency, as ResourceOptions takes it (its type also allows an
        # Output of a list, which nothing here passes).
        self._after_cluster: list[pulumi.Input[pulumi.Resource]] = (
            list(after)
            if isinstance(after, (list, tuple))
            else ([cast("pulumi.Input[pulumi.Resource]", after)] if after else [])
        )
        self.crds = CrdSources()
        self.values = {}
        self.ready = {}
        for need in args.needs:
            addon = need.addon
            if need.provided_by is not None:
                self.ready[addon.key] = []
                origin = f"provided by {need.provided_by}"
            elif args.creates_cluster:
                self.ready[addon.key] = [
                    self._install(addon, args.system_node_selector, args.image_mirrors, args.psa_version)
                ]
                origin = f"installed: {addon.title} {addon.version}"
            else:
                self.ready[addon.key] = self._look_up(addon)
                origin = f"declared in addons.preinstalled, looked up at preview: {addon.title}"
            for crd in addon.crds:
                self.crds.provide(crd.group, crd.kind, self.ready[addon.key], origin)
        self.register_outputs({"addons": [need.key for need in args.needs]})

    def _install(
        self,
        addon: AddOn,
        system_node_selector: Mapping[str, str] | None,
        image_mirrors: Mapping[str, str],
        psa_version: str,
    ) -> pulumi.Resource:
        before: list[pulumi.Input[pulumi.Resource]] = list(self._after_cluster)
        for required in addon.requires:
            before += self.ready[required]
        namespaces: dict[str, k8s.core.v1.Namespace] = {}
        last: pulumi.Resource | None = None
        for step in addon.steps:
            if isinstance(step, CloudFeature):
                raise ValueError(
                    f"{addon.title} is installed by the cloud ({step.name}); needs.py must mark it "
                    "provided_by the cloud on a cluster the program creates"
                )
            if isinstance(step, Manifests):
                last = k8s.yaml.v2.ConfigFile(
                    f"{addon.key}-{step.name}",
                    file=step.url,
                    opts=pulumi.ResourceOptions(parent=self, depends_on=before),
                )
            else:
                if step.namespace not in namespaces:
                    # The level the add-on's charts meet (the weakest of them), with its reason.
                    level, reasons = pod_security.strictest_level(
                        {
                            c.release: c.pod_security
                            for c in addon.steps
                            if isinstance(c, HelmChart) and c.namespace == step.namespace
                        }
                    )
                    namespaces[step.namespace] = k8s.core.v1.Namespace(
                        f"{addon.key}-{step.namespace}-ns",
                        metadata={
                            "name": step.namespace,
                            "labels": pod_security.namespace_labels(level, psa_version),
                            "annotations": pod_security.namespace_annotations(level, reasons),
                        },
                        opts=pulumi.ResourceOptions(parent=self, depends_on=before),
                    )
                last = self._release(step, system_node_selector, image_mirrors, [*before, namespaces[step.namespace]])
            before = [last]
        assert last is not None, f"add-on {addon.key} has no install step"
        return last

    def _release(
        self,
        chart: HelmChart,
        system_node_selector: Mapping[str, str] | None,
        image_mirrors: Mapping[str, str],
        before: list[pulumi.Input[pulumi.Resource]],
    ) -> k8s.helm.v3.Release:
        values = chart.values(system_node_selector, image_mirrors)
        self.values[chart.release] = values
        return k8s.helm.v3.Release(
            f"{chart.release}-release",
            k8s.helm.v3.ReleaseArgs(
                name=chart.release,
                chart=chart.chart,
                version=chart.version,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=chart.repo) if chart.repo else None,
                namespace=chart.namespace,
                create_namespace=False,
                values=values,
                # A failed install is uninstalled, so the next `pulumi up` starts clean.
                atomic=True,
                cleanup_on_fail=True,
                skip_await=False,
                timeout=HELM_TIMEOUT_SECONDS,
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=before),
        )

    def _look_up(self, addon: AddOn) -> list[pulumi.Resource]:
        return [
            k8s.apiextensions.v1.CustomResourceDefinition.get(
                lookup_name(addon, crd), crd.name, opts=pulumi.ResourceOptions(parent=self)
            )
            for crd in addon.crds
        ]
