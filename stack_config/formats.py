"""Formats of the strings a stack file holds, as the APIs that receive them spell them.

Pure functions and patterns, no pydantic: the schema's field types (stack_config/fields.py) call
them, and so may anything downstream that must check a value the same way (a name built from a
validated one, say). Each check cites the rule of the API that will receive the value, so a value
that passes here is one that API accepts; every pattern is matched against the WHOLE value
(`fullmatch`: `$` alone would let a trailing newline through). Errors quote the value through
`common.untrusted.excerpt` (short, escaped, never a secret).
"""

from __future__ import annotations

import difflib
import ipaddress
import re
import urllib.parse

from common.untrusted import excerpt, has_control_characters
from stack_config import regions

COMMIT_RE = re.compile(r"[0-9a-f]{40}")
# RFC 1035 label: what the program uses for the names it creates (a Service name must be one:
# k8s.io/apimachinery pkg/util/validation/validation.go IsDNS1035Label, at most 63 characters).
DNS_LABEL_RE = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
# RFC 1123 label (IsDNS1123Label; a namespace name), at most 63 characters.
DNS1123_LABEL_RE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
# RFC 1123 subdomain (IsDNS1123Subdomain; most object names: a PVC, a StorageClass), at most 253.
DNS1123_SUBDOMAIN_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
DNS1123_SUBDOMAIN_MAX = 253
# Label keys and values (IsQualifiedName / IsValidLabelValue): an optional DNS-subdomain prefix
# and '/', then a name of at most 63 characters; values at most 63 characters, may be empty.
LABEL_NAME_RE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
LABEL_VALUE_RE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
LABEL_KEY_RE = re.compile(
    r"(([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)
# Hub repo ids, as huggingface_hub 2.4.0 checks them (utils/_validators.py REPO_ID_REGEX and
# validate_repo_id): "<org>/<name>", each part 1-96 of [A-Za-z0-9._-] that starts and ends with a
# word character; no "--" or ".."; not ending in ".git". The Hub library raises its own error
# (with the value, newline and all) otherwise, so the same rule runs here first.
REPO_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")
REPO_PART_MAX = 96
# An image reference with a tag or digest; the policy pack enforces "not latest" on the output too.
IMAGE_RE = re.compile(r"[^\s@]+(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?")
IMAGE_MAX = 512


def _fullmatch(pattern: re.Pattern[str], v: str) -> bool:
    return isinstance(v, str) and pattern.fullmatch(v) is not None


def default_model_name(repo: str) -> str:
    """`meta-llama/Llama-3.1-8B-Instruct` -> `llama-3-1-8b-instruct` (a valid DNS label)."""
    name = re.sub(r"[^a-z0-9-]+", "-", repo.split("/")[-1].lower()).strip("-")
    name = re.sub(r"-{2,}", "-", name)
    if not name or not name[0].isalpha():
        name = f"m-{name}"
    return name[:63].rstrip("-")


# Another name a client may send as `model` (a Hub repo id such as meta-llama/Llama-3.1-8B-Instruct,
# or a short name): printable, no spaces, at most 256 characters.
ALIAS_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,255}")


def model_alias(v: str) -> str:
    if not _fullmatch(ALIAS_RE, v):
        raise ValueError(
            f"{excerpt(v)} is not a usable model name; use letters, digits and . _ : / @ + - (no spaces), "
            "starting with a letter or digit, at most 256 characters"
        )
    return v


def did_you_mean(value: str, options) -> str:
    """A hint naming the option the user most likely meant, or "".

    An option that begins with what was typed comes first (`H100` is `H100-80GB`, though difflib
    finds `H200` closer by characters); several such options are all named, since picking one of
    them would be a guess.
    """
    if not isinstance(value, str) or not value or len(value) > 200:
        return ""
    names = [o for o in options if isinstance(o, str)]
    extended = sorted(o for o in names if o.lower().startswith(value.lower()) and o.lower() != value.lower())
    if len(extended) == 1:
        return f" (did you mean {extended[0]!r}?)"
    if 1 < len(extended) <= 4:
        return f" (did you mean {', '.join(repr(o) for o in extended[:-1])} or {extended[-1]!r}?)"
    close = difflib.get_close_matches(value, names, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


# ---------------------------------------------------------------------------------------------
# Kubernetes


def dns_label(v: str) -> str:
    """A name this program gives an object (RFC 1035 label: also valid as a Service name)."""
    if not _fullmatch(DNS_LABEL_RE, v):
        raise ValueError(
            f"{excerpt(v)} is not a valid name; use lower-case letters, digits and '-', starting with a letter, "
            "at most 63 characters"
        )
    return v


def dns1123_label(v: str) -> str:
    """The name of an existing namespace (RFC 1123 label)."""
    if not _fullmatch(DNS1123_LABEL_RE, v):
        raise ValueError(
            f"{excerpt(v)} is not a Kubernetes namespace name; use at most 63 lower-case letters, "
            "digits and '-', starting and ending with a letter or digit"
        )
    return v


def dns1123_subdomain(v: str) -> str:
    """The name of an existing object such as a PVC, a StorageClass or a Gateway (RFC 1123 subdomain)."""
    if not _fullmatch(DNS1123_SUBDOMAIN_RE, v) or len(v) > DNS1123_SUBDOMAIN_MAX:
        raise ValueError(
            f"{excerpt(v)} is not a Kubernetes object name; use at most 253 lower-case letters, "
            "digits, '-' and '.', starting and ending with a letter or digit"
        )
    return v


def label_key(v: str) -> str:
    prefix, _, _ = v.rpartition("/") if isinstance(v, str) else ("", "", v)
    if not _fullmatch(LABEL_KEY_RE, v) or len(prefix) > DNS1123_SUBDOMAIN_MAX:
        raise ValueError(
            f"{excerpt(v)} is not a valid Kubernetes label key; use [prefix/]name with a name of at "
            "most 63 letters, digits, '-', '_' or '.' (and a DNS-subdomain prefix)"
        )
    return v


def label_value(v: str) -> str:
    if not _fullmatch(LABEL_VALUE_RE, v):
        raise ValueError(
            f"{excerpt(v)} is not a valid Kubernetes label value; use at most 63 letters, digits, "
            "'-', '_' or '.', starting and ending with a letter or digit"
        )
    return v


# Gateway API Hostname (HTTPRoute spec.hostnames items, gateway-api v1.6.1
# config/crd/standard/gateway.networking.k8s.io_httproutes.yaml: pattern below, maxLength 253;
# copied in tests/fixtures/crds).
HOSTNAME_RE = re.compile(r"(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def hostname(v: str) -> str:
    if not _fullmatch(HOSTNAME_RE, v) or len(v) > 253:
        raise ValueError(
            f"{excerpt(v)} is not a hostname a Gateway API route accepts; use lower-case DNS names "
            "such as llm.example.com (optionally *.example.com), at most 253 characters, no port"
        )
    return v


# ---------------------------------------------------------------------------------------------
# Images, Hub ids, commits


def validate_image(v: str) -> str:
    if not _fullmatch(IMAGE_RE, v) or len(v) > IMAGE_MAX:
        raise ValueError(
            f"{excerpt(v)} is not an image reference; write registry/name:tag or name@sha256:<digest>, "
            f"at most {IMAGE_MAX} characters without spaces"
        )
    if "@" not in v and ":" not in v.rsplit("/", 1)[-1]:
        raise ValueError(
            f"{excerpt(v)} has no tag or digest; pin it, e.g. vllm/vllm-openai:v0.32.0 or an @sha256: digest"
        )
    tag = v.rsplit("/", 1)[-1].split("@")[0].partition(":")[2]
    if tag == "latest" and "@" not in v:
        raise ValueError(f"{excerpt(v)} uses the floating tag latest; pin a version tag or an @sha256: digest")
    return v


def repo_id(v: str) -> str:
    parts = v.split("/") if isinstance(v, str) else []
    if (
        not _fullmatch(REPO_ID_RE, v)
        or any(len(p) > REPO_PART_MAX or not (p[-1].isalnum() or p[-1] == "_") for p in parts)
        or "--" in v
        or ".." in v
        or v.endswith(".git")
    ):
        raise ValueError(
            f"{excerpt(v)} is not a Hub repo id; write it as `org/name` (letters, digits, '.', '_', "
            "'-'; each part at most 96 characters), e.g. Qwen/Qwen2.5-7B-Instruct"
        )
    return v


def pinned_commit(v: str) -> str:
    """A Hub revision as a 40-character lower-case commit SHA; anything else names the fix."""
    history = "(the Hub shows it under 'Files and versions' > 'History')"
    if _fullmatch(COMMIT_RE, v):
        return v
    if _fullmatch(re.compile(r"[0-9a-fA-F]{40}"), v):
        raise ValueError(f"{excerpt(v)} has upper-case letters; write the commit SHA in lower case")
    if _fullmatch(re.compile(r"[0-9a-f]{7,39}"), v):
        raise ValueError(f"{excerpt(v)} is a short SHA; pin the full 40-character commit SHA {history}")
    if not _fullmatch(re.compile(r"[A-Za-z0-9._/-]{1,255}"), v):
        raise ValueError(f"{excerpt(v)} is not a commit SHA; pin a 40-character commit SHA {history}")
    raise ValueError(f"{excerpt(v)} is a branch or tag; pin a 40-character commit SHA {history}")


def exact_chart_version(v: str) -> str:
    """Helm matches chart versions literally; a range or `latest` would float."""
    if not isinstance(v, str) or not re.fullmatch(r"v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?", v) or len(v) > 64:
        raise ValueError(
            f"{excerpt(v)} is not an exact chart version; pin one such as 26.4.1 (ranges and latest float)"
        )
    return v


# ---------------------------------------------------------------------------------------------
# Clouds


# AWS region codes, from the AWS SDK's partition table (aws/aws-sdk-js-v3@685ff5d0
# packages/util-endpoints/src/lib/aws/partitions.json, each partition's regionRegex): aws
# `^(us|eu|ap|sa|ca|me|af|il|mx)\-\w+\-\d+$`, aws-cn `^cn\-\w+\-\d+$`, aws-us-gov `^us\-gov\-\w+\-\d+$`,
# and the isolated partitions us-iso, us-isob, eu-isoe, us-isof, eusc-de. Region codes are lower case.
AWS_REGION_RE = re.compile(
    r"(us|eu|ap|sa|ca|me|af|il|mx|cn|us-gov|us-iso|us-isob|eu-isoe|us-isof|eusc-de)"
    r"-[a-z]+-\d+"
)
# GCP regions and zones (https://cloud.google.com/compute/docs/regions-zones: a region such as
# us-central1 or northamerica-northeast1; a zone is the region, '-' and one letter: us-central1-a).
GCP_REGION_RE = re.compile(r"[a-z]+-[a-z]+\d+")
GCP_ZONE_RE = re.compile(r"[a-z]+-[a-z]+\d+-[a-z]")
# What any cloud location code looks like; the cloud-specific format is checked with the cloud.
LOCATION_RE = re.compile(r"[a-z0-9]+(-[a-z0-9]+){1,5}")


def location(v: str) -> str:
    """A region or zone code: lower-case words joined by '-' (the cloud's own format is checked later)."""
    if not _fullmatch(LOCATION_RE, v) or len(v) > 64:
        raise ValueError(
            f"{excerpt(v)} is not a region or zone code; write it as the cloud spells it, e.g. "
            "us-east-1 (AWS) or us-central1 / us-central1-a (GCP)"
        )
    return v


def _unknown_region(cloud: str, region: str, zone: str | None = None) -> str | None:
    """A region of the right shape that the cloud does not have (stack_config/regions.py, with its sources)."""
    if region in regions.REGIONS[cloud]:
        return None
    name = {"aws": "an AWS", "gcp": "a GCP"}[cloud]
    where = f"zone {excerpt(zone)} is in {excerpt(region)}, which" if zone else excerpt(region)
    return (
        f"{where} is not {name} region{did_you_mean(region, sorted(regions.REGIONS[cloud]))}; "
        f"the regions are listed at {regions.SOURCES[cloud].split(';')[0]} (a region opened since: add it to "
        "stack_config/regions.py)"
    )


def aws_region_problem(v: str) -> str | None:
    if _fullmatch(AWS_REGION_RE, v):
        return _unknown_region("aws", v)
    hint = did_you_mean(v, sorted(regions.AWS_REGIONS))
    return f"{excerpt(v)} is not an AWS region code; use one such as us-east-1 or eu-west-2{hint}"


def gcp_region_problem(v: str, zone_allowed: bool = False) -> str | None:
    if _fullmatch(GCP_REGION_RE, v):
        return _unknown_region("gcp", v)
    if zone_allowed and _fullmatch(GCP_ZONE_RE, v):
        # A zone is its region, '-' and one letter (https://cloud.google.com/compute/docs/regions-zones).
        return _unknown_region("gcp", v.rsplit("-", 1)[0], zone=v)
    what = "a GCP region (or, for an existing zonal cluster, a zone)" if zone_allowed else "a GCP region"
    hint = did_you_mean(v, sorted(regions.GCP_REGIONS))
    return f"{excerpt(v)} is not {what}; use one such as us-central1 or europe-west4{hint}"


def gcp_zone(v: str) -> str:
    if not _fullmatch(GCP_ZONE_RE, v):
        raise ValueError(f"{excerpt(v)} is not a GCP zone; use one such as us-central1-a")
    return v


# GCP project ids: 6-30 lower-case letters, digits or hyphens, starting with a letter, not ending
# with a hyphen (https://cloud.google.com/resource-manager/docs/creating-managing-projects,
# "Project ID requirements").
GCP_PROJECT_RE = re.compile(r"[a-z][a-z0-9-]{4,28}[a-z0-9]")


def gcp_project(v: str) -> str:
    if not _fullmatch(GCP_PROJECT_RE, v):
        raise ValueError(
            f"{excerpt(v)} is not a GCP project id; use 6-30 lower-case letters, digits or hyphens, "
            "starting with a letter (the id, not the project's display name or number)"
        )
    return v


# EC2 instance types (p5.48xlarge, u-6tb1.metal) and GCE machine types (a3-highgpu-8g, e2-standard-8).
MACHINE_TYPE_RE = re.compile(r"[a-z0-9][a-z0-9-]*(\.[a-z0-9-]+)?")


def machine_type(v: str) -> str:
    if not _fullmatch(MACHINE_TYPE_RE, v) or len(v) > 64:
        raise ValueError(
            f"{excerpt(v)} is not a machine type; write it as the cloud spells it, e.g. p5.48xlarge "
            "(AWS) or a3-highgpu-8g (GCP)"
        )
    return v


# Bucket names. The rules S3 and GCS share (both: 3-63 characters of lower-case letters, digits, '.'
# and '-' that start and end with a letter or digit, no IP address; S3 also refuses two adjacent
# periods): https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html and
# https://cloud.google.com/storage/docs/buckets#naming. Each cloud's own reserved prefixes and
# suffixes are checked with the cloud (bucket_name_problems).
BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
S3_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
S3_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")


def bucket_name(v: str) -> str:
    if not _fullmatch(BUCKET_RE, v):
        raise ValueError(
            f"{excerpt(v)} is not a valid bucket name; use 3-63 lower-case letters, digits, '.' or '-', "
            "starting and ending with a letter or digit"
        )
    if ".." in v:
        raise ValueError(f"{excerpt(v)} is not a valid bucket name: two adjacent periods; remove one")
    try:
        ipaddress.IPv4Address(v)
    except ValueError:
        return v
    raise ValueError(f"{excerpt(v)} is not a valid bucket name: buckets may not be named like an IP address")


def bucket_name_problems(cloud: str, v: str) -> list[str]:
    """What the chosen cloud's storage refuses beyond the shared rules of `bucket_name`."""
    if cloud == "aws":
        bad = [p for p in S3_RESERVED_PREFIXES if v.startswith(p)] + [s for s in S3_RESERVED_SUFFIXES if v.endswith(s)]
        return (
            [
                (
                    f"{excerpt(v)}: S3 reserves the {'prefix' if bad[0] in S3_RESERVED_PREFIXES else 'suffix'} "
                    f"{bad[0]!r}; choose another name"
                )
            ]
            if bad
            else []
        )
    if cloud == "gcp":
        # GCS: "cannot begin with the goog prefix", "cannot contain google or close misspellings".
        spelled = v.replace("0", "o")
        if v.startswith("goog") or "google" in spelled:
            return [
                (
                    f"{excerpt(v)}: Cloud Storage refuses names that begin with 'goog' or contain 'google'; "
                    "choose another name"
                )
            ]
    return []


# ---------------------------------------------------------------------------------------------
# URLs, paths, hosts


URL_MAX = 2048


def http_url(v: str) -> str:
    """An http(s) URL with a host; credentials in the URL are refused (they would land in manifests)."""
    if not isinstance(v, str) or len(v) > URL_MAX or has_control_characters(v) or " " in v:
        raise ValueError(f"{excerpt(v)} is not a URL; write it as http(s)://host[:port][/path], without spaces")
    try:
        parsed = urllib.parse.urlsplit(v)
        port = parsed.port
    except ValueError as err:
        raise ValueError(f"{excerpt(v)} is not a valid URL ({err}); write it as http(s)://host[:port][/path]") from None
    if parsed.username is not None or parsed.password is not None:
        raise ValueError(
            "the URL carries credentials (user:password@ before the host), which would be written into "
            "the cluster's manifests in plain text; remove them and let the target authenticate "
            "another way"
        )
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(
            f"{excerpt(v)} is not an http(s) URL with a host; write it as http(s)://host[:port][/path], "
            "e.g. http://prometheus-operated.monitoring.svc:9090"
        )
    if port == 0:
        raise ValueError(f"{excerpt(v)}: port 0 is not a server port")
    return v


# PATH_MAX on Linux (include/uapi/linux/limits.h).
PATH_MAX = 4096


def file_path(v: str) -> str:
    if not isinstance(v, str) or not v or len(v) > PATH_MAX or has_control_characters(v):
        raise ValueError(
            f"{excerpt(v)} is not a usable file path; give a path of at most {PATH_MAX} characters "
            "without line breaks or other control characters"
        )
    return v


# PEM text (RFC 7468): "-----BEGIN <label>-----" ... "-----END <label>-----". A public key or a
# certificate chain is public; a private key never belongs in config (base.py refuses secrets too).
PEM_MAX = 16_384
PEM_RE = re.compile(r"\s*(-----BEGIN ([A-Z0-9 ]+)-----\r?\n[A-Za-z0-9+/=\r\n]+-----END \2-----\s*)+")


def pem_public(v: str) -> str:
    if not isinstance(v, str) or len(v) > PEM_MAX or not PEM_RE.fullmatch(v):
        raise ValueError(
            f"{excerpt(v)} is not PEM text; paste the file as a YAML block (|), from "
            "-----BEGIN PUBLIC KEY----- (or CERTIFICATE) to its -----END ...----- line, at most "
            f"{PEM_MAX:,} characters"
        )
    if "PRIVATE KEY" in v:
        raise ValueError("this is a private key; verification needs only the public key (openssl pkey -pubout)")
    return v


def repo_relative_path(v: str) -> str:
    """A file inside a Hub repo: relative, '/'-separated, no '..' and no control characters."""
    file_path(v)
    if v.startswith("/") or any(part in ("", ".", "..") for part in v.split("/")):
        raise ValueError(
            f"{excerpt(v)} is not a path inside the repo; write it relative to the repo root, e.g. model.sig"
        )
    return v


def printable_name(v: str) -> str:
    """A name without a fixed format (a kubeconfig context): no control characters, at most 253."""
    if not isinstance(v, str) or not v or len(v) > DNS1123_SUBDOMAIN_MAX or has_control_characters(v):
        raise ValueError(
            f"{excerpt(v)} is not a usable name; at most 253 characters, no line breaks or other control characters"
        )
    return v


# Linux network interface names: fewer than IFNAMSIZ (16) bytes, no '/', no whitespace, not '.' or
# '..' (include/uapi/linux/if.h IFNAMSIZ; net/core/dev.c dev_valid_name).
NIC_RE = re.compile(r"[A-Za-z0-9_.:-]{1,15}")


def nic_name(v: str) -> str:
    if not _fullmatch(NIC_RE, v) or v in (".", ".."):
        raise ValueError(
            f"{excerpt(v)} is not a Linux network interface name; use at most 15 characters such as "
            "ens1f0, without '/' or spaces"
        )
    return v


KERNEL_NAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def kernel_name(v: str) -> str:
    """A kernel driver or vendor name (mlx5_core, 15b3)."""
    if not _fullmatch(KERNEL_NAME_RE, v):
        raise ValueError(f"{excerpt(v)} is not a driver name; use letters, digits, '_', '.' or '-', e.g. mlx5_core")
    return v


# An AWS Secrets Manager secret ARN for an ECR pull-through cache rule's upstream credentials. The
# secret's name must begin with `ecr-pullthroughcache/` and live in the rule's account and Region
# (https://docs.aws.amazon.com/AmazonECR/latest/userguide/pull-through-cache-creating-rule.html,
# "Prerequisites"); the ARN form is arn:<partition>:secretsmanager:<region>:<account>:secret:<name>.
ECR_CACHE_SECRET_ARN_RE = re.compile(
    r"arn:aws(?:-[a-z]+)*:secretsmanager:[a-z]{2}(?:-[a-z]+)+-\d:\d{12}:secret:ecr-pullthroughcache/[A-Za-z0-9/_+=.@-]{1,400}"
)


def ecr_cache_secret_arn(v: str) -> str:
    if not _fullmatch(ECR_CACHE_SECRET_ARN_RE, v):
        raise ValueError(
            f"{excerpt(v)} is not the ARN of a Secrets Manager secret named ecr-pullthroughcache/...; "
            "ECR pull-through cache reads upstream credentials only from such a secret, e.g. "
            "arn:aws:secretsmanager:us-east-1:123456789012:secret:ecr-pullthroughcache/docker-hub-AbCdEf"
        )
    return v


# An IPv4 network in CIDR form, host bits zero: what EKS takes in vpcConfig.publicAccessCidrs and
# GKE in masterAuthorizedNetworksConfig.cidrBlocks[].cidrBlock (both IPv4 CIDR blocks; EKS API
# reference VpcConfigRequest, GKE REST reference MasterAuthorizedNetworksConfig.CidrBlock).
def ipv4_cidr(v: str) -> str:
    try:
        ipaddress.IPv4Network(v, strict=True)
    except ValueError as err:
        raise ValueError(
            f"{excerpt(v)} is not an IPv4 network in CIDR form such as 203.0.113.0/24 (host bits zero) ({err})"
        ) from None
    return v


# A Cloud KMS key: an AWS KMS key ARN (arn:<partition>:kms:<region>:<account>:key/<key id>; an
# alias ARN is refused by EKS encryptionConfig, which wants the key itself: EKS API reference,
# Provider.keyArn) or a Google Cloud KMS CryptoKey resource name (projects/<p>/locations/<l>/
# keyRings/<r>/cryptoKeys/<k>, the form GKE's databaseEncryption.keyName takes).
AWS_KMS_KEY_ARN_RE = re.compile(
    r"arn:aws(-cn|-us-gov)?:kms:[a-z0-9-]+:\d{12}:key/[0-9a-f-]{36}|"
    r"arn:aws(-cn|-us-gov)?:kms:[a-z0-9-]+:\d{12}:key/mrk-[0-9a-f]{32}"
)
GCP_CRYPTO_KEY_RE = re.compile(
    r"projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/locations/[a-z0-9-]+/keyRings/[A-Za-z0-9_-]{1,63}"
    r"/cryptoKeys/[A-Za-z0-9_-]{1,63}"
)


def kms_key(v: str) -> str:
    if not (_fullmatch(AWS_KMS_KEY_ARN_RE, v) or _fullmatch(GCP_CRYPTO_KEY_RE, v)):
        raise ValueError(
            f"{excerpt(v)} is neither an AWS KMS key ARN (arn:aws:kms:<region>:<account>:key/<id>) nor a "
            "Cloud KMS key name (projects/<p>/locations/<l>/keyRings/<r>/cryptoKeys/<k>)"
        )
    return v
