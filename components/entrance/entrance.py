"""Entrance: one HTTPS base URL for every model and adapter of the stack.

Per base model (engine vllm): a release of the llm-d-router-gateway chart (its InferencePool and
endpoint picker, picker.py), a PodDisruptionBudget for the pickers, and on GKE a health check and
backend timeout for the pool (gke.py). Once per stack: the Gateway (routes.py) of the cloud's
implementation (stack_config/entrance.py `implementation_for`), the HTTPRoute from /v1 to the pools,
the HTTP->HTTPS redirect, the certificate's Issuer (tls.py, ACME only) and, with several base
models, what writes the base model of the body's `model` into the header the route matches:
agentgateway's policy (body_routing.py) or, on GKE, the Body-Based Router and its ConfigMaps (bbr.py).

The per-model Services (components/serving/vllm.py) stay for in-cluster clients and the smoke
check; the entrance is another way in, not a replacement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from common import contract
from common.facts import Fact
from components.addons import agentgateway, inference_extension, llm_d_router
from components.addons.crd_sources import CrdSources, custom_resource
from components.entrance import bbr, body_routing, gke, google_cert, picker, rewrites, routes, tls
from components.serving import probes
from components.serving.vllm import selector_labels
from planner.plan import ModelPlan
from stack_config.entrance import EntranceImplementation

# The stack's one Gateway and its objects, in the serving namespace.
GATEWAY_NAME = "llm-serving"
COMPONENT = "entrance"
# Picker releases are not awaited (picker.py: Helm's wait cannot pass with a not-Ready standby);
# Pulumi still gives Helm this long to apply the chart's objects.
PICKER_HELM_TIMEOUT_SECONDS = 300
# The Classic Load Balancer EKS's built-in service controller puts in front of agentgateway's
# proxy Service closes a connection idle this long (annotation of the AWS cloud provider,
# ServiceAnnotationLoadBalancerConnectionIdleTimeout; default 60 s). A request that is not streamed
# sends nothing back until its generation ends, so the idle timeout must outlast the longest
# generation (the largest drain allowance) by a margin.
AWS_IDLE_TIMEOUT_ANNOTATION = "service.beta.kubernetes.io/aws-load-balancer-connection-idle-timeout"
IDLE_TIMEOUT_MARGIN_SECONDS = 60
CLASSIC_LB = Fact(
    subject="EKS's built-in service controller gives agentgateway's LoadBalancer Service a Classic Load Balancer "
    "with the annotated idle timeout",
    value=None,
    source="kubernetes/cloud-provider-aws ServiceAnnotationLoadBalancerConnectionIdleTimeout; not run on EKS",
    established=False,
    resolve_with="aws elb describe-load-balancer-attributes --load-balancer-name <name> "
    "--query LoadBalancerAttributes.ConnectionSettings",
)


def unresolved_facts(
    cloud: str,
    implementation: str,
    certificate: str,
    several: bool,
    installs_implementation: bool,
    body_router: str = "agentgateway",
) -> list[Fact]:
    """The outside facts this stack's entrance rests on that could not be established here."""
    facts = [picker.PUBLISHED, inference_extension.PUBLISHED, llm_d_router.PUBLISHED]
    if installs_implementation:
        facts.append(agentgateway.PUBLISHED)
    if several and body_router == "bbr":
        facts += [bbr.PUBLISHED, bbr.ROUTING_EXTENSION_SERVED, bbr.UNKNOWN_NAME]
    elif several:
        facts.append(body_routing.UNKNOWN_NAME)
    if cloud == "aws" and implementation == "agentgateway":
        facts.append(CLASSIC_LB)
    if certificate == "google-managed":
        facts.append(google_cert.ISSUED_AFTER_CNAME)
    return facts


@dataclass
class EntranceArgs:
    hostname: str
    namespace: str
    implementation: EntranceImplementation
    """The GatewayClass and what it can do."""
    cloud: str
    plans: Sequence[ModelPlan]
    """The plans behind the entrance (engine vllm)."""
    picker_replicas: int
    failure_mode: str
    certificate: str
    """acme | secret | google-managed."""
    crds: CrdSources
    acme_server: str | None = None
    acme_email: str | None = None
    tls_secret: str | None = None
    """certificate secret: the user's kubernetes.io/tls Secret."""
    google_certificate: google_cert.GoogleManagedCertificate | None = None
    """certificate google-managed: the Certificate Manager certificate the HTTPS listener names."""
    monitoring: bool = True
    monitoring_labels: Mapping[str, str] = field(default_factory=dict)
    system_node_selector: Mapping[str, str] | None = None
    implementation_ready: list[pulumi.Resource] = field(default_factory=list)
    """The Gateway implementation's install (agentgateway's release) when the program installs it."""
    namespace_ready: list[pulumi.Resource] = field(default_factory=list)
    """The serving namespace (every object of the entrance lives in it)."""
    image_mirrors: Mapping[str, str] = field(default_factory=dict)
    """images.pullThrough: upstream registry -> the cluster's cache for it (Cluster.image_mirrors)."""


def certificate_summary(args: EntranceArgs) -> str:
    if args.certificate == "acme":
        return f"ACME via cert-manager ({args.acme_server}), HTTP-01 through the Gateway's port 80"
    if args.certificate == "google-managed":
        assert args.google_certificate is not None
        cert = args.google_certificate
        return (
            f"Google-managed, Certificate Manager certificate {cert.certificate_name} in {cert.region} "
            "(DNS authorization: create the CNAME record below once; issued and renewed by Google; "
            "certificatemanager.googleapis.com enabled by the program)"
        )
    return f"Secret {args.namespace}/{args.tls_secret} (yours)"


def _labels(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    return {contract.LABEL_PART_OF: contract.PART_OF, contract.LABEL_COMPONENT: COMPONENT, **(extra or {})}


def served_names(plans: Sequence[ModelPlan]) -> dict[str, list[str]]:
    """base model -> the adapters served on it."""
    return {p.served_name: (p.lora.names if p.lora else []) for p in plans}


def aliases_of(plan: ModelPlan) -> dict[str, list[str]]:
    """served name (the model's or an adapter's) -> its aliases, for one base model."""
    found = {plan.served_name: list(plan.model.aliases)}
    found.update({a.name: list(a.aliases) for a in plan.model.adapters})
    return {name: aliases for name, aliases in found.items() if aliases}


def body_routing_summary(several: bool, body_router: str) -> str:
    if not several:
        return "none needed (one base model)"
    if body_router == "bbr":
        return (
            f"{contract.BASE_MODEL_HEADER} from the body's model: the Body-Based Router {bbr.VERSION} "
            f"(release {bbr.RELEASE}), called by the Gateway through a GCPRoutingExtension; adapters and aliases "
            f"from one ConfigMap per base model (label {bbr.MANAGED_LABEL})"
        )
    return f"{contract.BASE_MODEL_HEADER} from the body's model (AgentgatewayPolicy)"


def request_timeout_seconds(plan: ModelPlan) -> int:
    return probes.drain_seconds(plan)


def load_balancer_annotations(cloud: str, implementation: str, plans: Sequence[ModelPlan]) -> dict[str, str]:
    if cloud == "aws" and implementation == "agentgateway":
        longest = max(request_timeout_seconds(p) for p in plans)
        return {AWS_IDLE_TIMEOUT_ANNOTATION: str(longest + IDLE_TIMEOUT_MARGIN_SECONDS)}
    return {}


class Entrance(pulumi.ComponentResource):
    base_url: str
    models: list[str]
    """Every name a client may send as `model`, base models first."""
    gateway_name: str

    def __init__(self, name: str, args: EntranceArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:k8s:Entrance", name, None, opts)
        if not args.plans:
            raise ValueError("the entrance needs at least one vLLM model behind it")
        impl = args.implementation
        ns = args.namespace
        child = pulumi.ResourceOptions(parent=self, depends_on=list(args.namespace_ready))
        labels = _labels()
        names = served_names(args.plans)
        self.gateway_name = GATEWAY_NAME
        self.base_url = f"https://{args.hostname}{routes.API_PREFIX}"
        self.models = [n for base, adapters in names.items() for n in [base, *adapters]]
        self.aliases = {name: aliases for p in args.plans for name, aliases in aliases_of(p).items()}

        # -- per base model: the pool and its pickers ---------------------------------------------
        # The chart renders the InferencePool (and, with monitoring, a ServiceMonitor); the picker looks
        # for the llm-d.ai kinds once, at start (components/addons/llm_d_router.py), so it starts after them.
        pool_kinds = [
            ("inference.networking.k8s.io/v1", "InferencePool"),
            ("llm-d.ai/v1alpha2", "InferenceModelRewrite"),
            ("llm-d.ai/v1alpha2", "InferenceObjective"),
        ]
        if args.monitoring:
            pool_kinds.append(("monitoring.coreos.com/v1", "ServiceMonitor"))
        chart_crds = [r for api, kind in pool_kinds for r in args.crds.depends_on(api, kind)]
        self.picker_values: dict[str, dict] = {}
        pickers: list[pulumi.Resource] = []
        pool_routes: list[routes.PoolRoute] = []
        for plan in args.plans:
            spec = picker.PickerSpec(
                release=plan.served_name,
                namespace=ns,
                server_labels=selector_labels(plan),
                replicas=args.picker_replicas,
                failure_mode=args.failure_mode,
                monitoring=args.monitoring,
                monitoring_labels=args.monitoring_labels,
                system_node_selector=args.system_node_selector,
                image_mirrors=args.image_mirrors,
            )
            values = picker.picker_values(spec)
            self.picker_values[spec.release] = values
            release = k8s.helm.v3.Release(
                f"{name}-{spec.release}-picker",
                k8s.helm.v3.ReleaseArgs(
                    name=spec.release,
                    chart=picker.CHART,
                    version=picker.VERSION,
                    namespace=ns,
                    create_namespace=False,
                    values=values,
                    # Not awaited: with leader election one picker is never Ready, which Helm's
                    # wait counts as a failed rollout (picker.py). The pool and the route work
                    # as soon as the leader is up; the pickers' readiness is watched by Prometheus.
                    skip_await=True,
                    atomic=False,
                    timeout=PICKER_HELM_TIMEOUT_SECONDS,
                ),
                opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.namespace_ready) + chart_crds),
            )
            pickers.append(release)
            pdb = picker.pdb_manifest(spec, _labels({contract.LABEL_MODEL: plan.served_name}))
            k8s.policy.v1.PodDisruptionBudget(
                f"{name}-{spec.release}-picker-pdb", metadata=pdb["metadata"], spec=pdb["spec"], opts=child
            )
            timeout = request_timeout_seconds(plan)
            pool_routes.append(
                routes.PoolRoute(pool=spec.release, base_model=plan.served_name, request_timeout_seconds=timeout)
            )
            rewrite = rewrites.rewrite_manifest(
                spec.release, ns, aliases_of(plan), _labels({contract.LABEL_MODEL: plan.served_name})
            )
            if rewrite is not None:
                custom_resource(
                    f"{name}-{spec.release}-aliases",
                    rewrite,
                    args.crds,
                    pulumi.ResourceOptions(parent=self, depends_on=[release]),
                )
            if impl.name == "gke":
                pool_opts = pulumi.ResourceOptions(parent=self, depends_on=[release])
                pool_labels = _labels({contract.LABEL_MODEL: plan.served_name})
                custom_resource(
                    f"{name}-{spec.release}-health-check",
                    gke.health_check_policy_manifest(spec.release, ns, pool_labels),
                    args.crds,
                    pool_opts,
                )
                custom_resource(
                    f"{name}-{spec.release}-backend-policy",
                    gke.backend_policy_manifest(spec.release, ns, timeout, pool_labels),
                    args.crds,
                    pool_opts,
                )

        # -- the Gateway, its certificate and its routes ------------------------------------------
        annotations: dict[str, str] = {}
        tls_secret = args.tls_secret
        issuer = None
        if args.certificate == "acme":
            issuer_name = f"{GATEWAY_NAME}-acme"
            tls_secret = f"{GATEWAY_NAME}-tls"
            annotations[tls.ISSUER_ANNOTATION] = issuer_name
            issuer = custom_resource(
                f"{name}-issuer",
                tls.issuer_manifest(
                    issuer_name,
                    ns,
                    gateway=GATEWAY_NAME,
                    server=args.acme_server or "",
                    email=args.acme_email,
                    labels=labels,
                ),
                args.crds,
                child,
            )
        tls_options: dict[str, str] | None = None
        certificate_ready: list[pulumi.Resource] = []
        if args.certificate == "google-managed":
            assert args.google_certificate is not None, "google-managed needs the certificate (__main__ creates it)"
            tls_options = google_cert.listener_options(args.google_certificate.certificate_name)
            # GKE refuses a listener naming a certificate that does not exist yet (google_cert.py).
            certificate_ready = [args.google_certificate.certificate]
        else:
            assert tls_secret, "certificate secret needs tls_secret (the stack checks require secretName)"
        gateway = routes.gateway_manifest(
            GATEWAY_NAME,
            ns,
            gateway_class=impl.gateway_class,
            hostname=args.hostname,
            tls_secret=tls_secret,
            labels=labels,
            annotations=annotations,
            infrastructure_annotations=load_balancer_annotations(args.cloud, impl.name, args.plans),
            tls_options=tls_options,
        )
        gateway_opts = pulumi.ResourceOptions(
            parent=self,
            depends_on=list(args.namespace_ready)
            + list(args.implementation_ready)
            + ([issuer] if issuer else [])
            + certificate_ready,
        )
        gateway_resource = custom_resource(f"{name}-gateway", gateway, args.crds, gateway_opts)

        several = len(args.plans) > 1
        # The route and whatever writes its header may start in either order: until both are up a
        # request with several base models matches no rule (404) either way.
        route_opts = pulumi.ResourceOptions(parent=self, depends_on=[gateway_resource, *pickers])
        if several:
            # Every other name a client may send per base model: its adapters, then every alias.
            others = {
                p.served_name: names[p.served_name] + [a for aliases in aliases_of(p).values() for a in aliases]
                for p in args.plans
            }
            mapping = body_routing.base_model_map(others)  # refuses a name served twice
            if impl.body_router == "bbr":
                self._body_router(name, args, others, gateway_resource, child)
            else:
                policy = body_routing.agentgateway_policy_manifest(
                    f"{GATEWAY_NAME}-model-routing", ns, gateway=GATEWAY_NAME, mapping=mapping, labels=labels
                )
                custom_resource(f"{name}-model-routing", policy, args.crds, route_opts)
        route = routes.inference_route_manifest(
            GATEWAY_NAME,
            ns,
            gateway=GATEWAY_NAME,
            hostname=args.hostname,
            pools=pool_routes,
            route_on_header=several,
            request_timeouts=impl.name != "gke",
            labels=labels,
        )
        custom_resource(f"{name}-route", route, args.crds, route_opts)
        redirect = routes.redirect_route_manifest(
            f"{GATEWAY_NAME}-redirect", ns, gateway=GATEWAY_NAME, hostname=args.hostname, labels=labels
        )
        custom_resource(
            f"{name}-redirect", redirect, args.crds, pulumi.ResourceOptions(parent=self, depends_on=[gateway_resource])
        )
        lb = load_balancer_annotations(args.cloud, impl.name, args.plans)
        self.summary = {
            "baseUrl": self.base_url,
            "models": self.models,
            "aliases": {alias: name for name, aliases in self.aliases.items() for alias in aliases} or None,
            "gateway": f"{ns}/{GATEWAY_NAME}",
            "implementation": impl.title,
            "gatewayClass": impl.gateway_class,
            "certificate": certificate_summary(args),
            "certificateDnsRecord": (
                args.google_certificate.dns_record if args.google_certificate is not None else None
            ),
            "bodyRouting": body_routing_summary(several, impl.body_router),
            "loadBalancerIdleTimeoutSeconds": int(lb[AWS_IDLE_TIMEOUT_ANNOTATION]) if lb else None,
            "pools": [
                {
                    "pool": route.pool,
                    "adapters": names[route.base_model],
                    "pickers": args.picker_replicas,
                    "failureMode": args.failure_mode,
                    "selects": ", ".join(f"{k}={v}" for k, v in selector_labels(plan).items()),
                    "targetPort": contract.SERVER_PORT,
                    "requestTimeoutSeconds": route.request_timeout_seconds,
                }
                for route, plan in zip(pool_routes, args.plans, strict=True)
            ],
            "dnsRecord": f"{args.hostname} -> the address of `{self.address_command(ns)}`",
            "unresolved": [
                {"subject": f.subject, "source": f.source, "resolveWith": f.resolve_with}
                for f in unresolved_facts(
                    args.cloud, impl.name, args.certificate, several, impl.installed_by_program, impl.body_router
                )
            ],
        }
        self.register_outputs({"baseUrl": self.base_url, "models": self.models})

    def _body_router(
        self,
        name: str,
        args: EntranceArgs,
        others: Mapping[str, list[str]],
        gateway: pulumi.Resource,
        child: pulumi.ResourceOptions,
    ) -> None:
        """GKE: the Body-Based Router release (its GCPRoutingExtension attaches it to the Gateway) and
        one ConfigMap per base model naming the adapters and aliases served on it (bbr.py)."""
        ns = args.namespace
        configmaps: list[pulumi.Resource] = []
        for base, names in others.items():
            manifest = bbr.adapters_configmap(base, names, ns, _labels({contract.LABEL_MODEL: base}))
            configmaps.append(
                k8s.core.v1.ConfigMap(
                    f"{name}-{base}-bbr-models", metadata=manifest["metadata"], data=manifest["data"], opts=child
                )
            )
        rendered = [
            r
            for api, kind in (
                ("networking.gke.io/v1", "GCPRoutingExtension"),
                ("networking.gke.io/v1", "HealthCheckPolicy"),
            )
            for r in args.crds.depends_on(api, kind)
        ]
        values = bbr.router_values(
            bbr.RouterSpec(namespace=ns, gateway=GATEWAY_NAME, replicas=args.picker_replicas), args.image_mirrors
        )
        k8s.helm.v3.Release(
            f"{name}-body-router",
            k8s.helm.v3.ReleaseArgs(
                name=bbr.RELEASE,
                chart=bbr.CHART,
                version=bbr.VERSION,
                namespace=ns,
                create_namespace=False,
                values=values,
                timeout=PICKER_HELM_TIMEOUT_SECONDS,
            ),
            # The routing extension names the Gateway; the router reads the ConfigMaps when it starts.
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=list(args.namespace_ready) + rendered + [gateway, *configmaps]
            ),
        )
        pdb = bbr.pdb_manifest(ns, _labels())
        k8s.policy.v1.PodDisruptionBudget(
            f"{name}-body-router-pdb", metadata=pdb["metadata"], spec=pdb["spec"], opts=child
        )

    def address_command(self, namespace: str) -> str:
        """What a person runs for the address the host name's DNS record must point at."""
        return f"kubectl get gateway {self.gateway_name} -n {namespace} -o jsonpath='{{.status.addresses[0].value}}'"
