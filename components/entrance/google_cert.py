"""The HTTPS listener's certificate on GKE: Google-managed, from Certificate Manager (tls.certificate google-managed).

Why not cert-manager's HTTP-01 through the same Gateway: GKE's Gateway controller translates a
Gateway as a whole, and a listener whose certificate does not exist fails the translation ("failed
to translate Gateway ...: Error GWCER105: Listener "https" is invalid", cert-manager/cert-manager#6196,
kubernetes-sigs/gateway-api#1275), so the port-80 route that would answer the challenge is never
programmed while the Secret the challenge would produce is missing: the certificate can never be
issued. A Google-managed certificate authorized by DNS needs nothing from the Gateway: Certificate
Manager checks a CNAME record the user creates once and then issues and renews by itself
(https://cloud.google.com/certificate-manager/docs/domain-authorization, "DNS authorization":
certificates are provisioned "in advance, before the target proxy is ready to serve network traffic").

What is created, in the cluster's project:
- the Certificate Manager API (certificatemanager.googleapis.com), before anything of it;
- a DnsAuthorization for the host name, in the cluster's region. A regional authorization is of type
  PER_PROJECT_RECORD when unset (pulumi_gcp 10.2.0 certificatemanager/dns_authorization.py, `type`:
  "FIXED_RECORD will be used for global resources, and PER_PROJECT_RECORD will be used for other
  locations"); its `dns_resource_records` hold the CNAME record the user creates;
- a Google-managed Certificate in the same region, `managed.domains` = [hostname] and
  `managed.dns_authorizations` = [the authorization's id] (pulumi_gcp 10.2.0
  certificatemanager/certificate.py, `location`: "If not specified, "global" is used"). GKE's
  regional classes take regional certificates only, by name, in the HTTPS listener's
  `tls.options["networking.gke.io/cert-manager-certs"]` ("Secure a Gateway",
  https://cloud.google.com/kubernetes-engine/docs/how-to/secure-gateway); Google-managed certificates
  with DNS authorization exist in global, regional and cross-region locations, load-balancer
  authorization in global only (https://cloud.google.com/certificate-manager/docs/certificates).

The Gateway waits for the Certificate: GKE refuses a listener that names a certificate that does not
exist (the same GWCER105, kubernetes-sigs/gateway-api#1275).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from common.facts import Fact
from components.cluster.gcp import apis

# The listener option GKE reads the Certificate Manager certificates from (comma-separated names).
CERT_MANAGER_CERTS_OPTION = "networking.gke.io/cert-manager-certs"
# Certificate Manager names: "1-64 characters long, and match the regular expression
# [a-zA-Z][a-zA-Z0-9_-]*" (pulumi_gcp 10.2.0 certificatemanager/certificate.py, `name`).
MAX_NAME = 64

ISSUED_AFTER_CNAME = Fact(
    subject="The regional Google-managed certificate turns ACTIVE once the DNS authorization's CNAME record resolves, "
    "and GKE's regional Gateway serves it from then on without being changed",
    value=None,
    source="https://cloud.google.com/certificate-manager/docs/domain-authorization; not run on GKE",
    established=False,
    resolve_with="gcloud certificate-manager certificates describe <name> --location <region> "
    "--format='value(managed.state,managed.authorizationAttemptInfo)'",
)


def certificate_name(cluster_name: str) -> str:
    """One certificate per stack's cluster: names are unique per project and location."""
    name = f"{cluster_name}-entrance"
    if not name[:1].isalpha() or len(name) > MAX_NAME:
        raise ValueError(f"{name!r} is not a Certificate Manager name ([a-zA-Z][a-zA-Z0-9_-]*, at most {MAX_NAME})")
    return name


def listener_options(name: str) -> dict[str, str]:
    return {CERT_MANAGER_CERTS_OPTION: name}


def describe_command(name: str, region: str) -> str:
    return (
        f"gcloud certificate-manager dns-authorizations describe {name} --location {region} "
        "--format='value(dnsResourceRecord.name,dnsResourceRecord.type,dnsResourceRecord.data)'"
    )


def _record_line(records: list | None, fallback: str) -> str:
    if not records:
        return fallback
    record = records[0]
    get = record.get if isinstance(record, dict) else lambda k: getattr(record, k, None)
    return f"{get('name')} {get('type')} {get('data')}"


@dataclass(frozen=True)
class GoogleManagedCertificateArgs:
    hostname: str
    name: str
    """The certificate's (and the authorization's) name; the listener names it."""
    region: str
    project: str | None
    """cluster.gcpProject; None: the provider's project (`gcp:project`), as the cluster layer does."""


class GoogleManagedCertificate(pulumi.ComponentResource):
    """A DNS-authorized, Google-managed Certificate Manager certificate for one host name."""

    certificate: gcp.certificatemanager.Certificate
    certificate_name: str
    region: str
    dns_record: pulumi.Output[str]
    """The CNAME record the user creates once: '<name> CNAME <data>'."""

    def __init__(self, name: str, args: GoogleManagedCertificateArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:gcp:GoogleManagedCertificate", name, None, opts)
        self.certificate_name = args.name
        self.region = args.region
        child = pulumi.ResourceOptions(parent=self)
        project: pulumi.Input[str] = args.project or gcp.organizations.get_client_config_output().project
        self.apis = apis.ProjectApis(
            f"{name}-apis", apis.ProjectApisArgs(project=project, apis=[apis.CERTIFICATE_MANAGER]), opts=child
        )
        after_api = pulumi.ResourceOptions(parent=self, depends_on=self.apis.needs(apis.CERTIFICATE_MANAGER))
        self.authorization = gcp.certificatemanager.DnsAuthorization(
            f"{name}-dns-authorization",
            name=args.name,
            domain=args.hostname,
            location=args.region,
            project=project,
            description=f"llm-serving entrance: proves {args.hostname} for its Google-managed certificate",
            opts=after_api,
        )
        self.certificate = gcp.certificatemanager.Certificate(
            f"{name}-certificate",
            name=args.name,
            location=args.region,
            project=project,
            description=f"llm-serving entrance: https://{args.hostname}",
            managed=gcp.certificatemanager.CertificateManagedArgs(
                domains=[args.hostname], dns_authorizations=[self.authorization.id]
            ),
            opts=after_api,
        )
        fallback = f"known after the first `pulumi up`: {describe_command(args.name, args.region)}"
        self.dns_record = self.authorization.dns_resource_records.apply(lambda r: _record_line(r, fallback))
        self.register_outputs({"dnsRecord": self.dns_record})
