"""Typed fields the sections share: a name, a region, a bucket, a URL, a bounded count.

A new config key takes one of these types (or Field bounds from the constants below) and so gets
the same check as every other key of its kind; the formats themselves, each citing the rule of the
API that receives the value, live in stack_config/formats.py. tests/stack_config/test_config_limits.py walks
the whole schema and fails for a number without both bounds or a string without a format.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

from stack_config import formats

# A name this program gives a Kubernetes object (RFC 1035 label, also a valid Service name).
DnsLabel = Annotated[str, AfterValidator(formats.dns_label)]
# The name of a namespace that exists already (RFC 1123 label).
NamespaceName = Annotated[str, AfterValidator(formats.dns1123_label)]
# The name of an existing object: a PVC, a StorageClass, a Gateway (RFC 1123 subdomain).
ObjectName = Annotated[str, AfterValidator(formats.dns1123_subdomain)]
LabelKey = Annotated[str, AfterValidator(formats.label_key)]
LabelValue = Annotated[str, AfterValidator(formats.label_value)]
Hostname = Annotated[str, AfterValidator(formats.hostname)]
HttpUrl = Annotated[str, AfterValidator(formats.http_url)]
BucketName = Annotated[str, AfterValidator(formats.bucket_name)]
# A region or zone code; its cloud's own format is checked with the cloud (stack_config/stack.py).
Location = Annotated[str, AfterValidator(formats.location)]
GcpZone = Annotated[str, AfterValidator(formats.gcp_zone)]
GcpProject = Annotated[str, AfterValidator(formats.gcp_project)]
MachineType = Annotated[str, AfterValidator(formats.machine_type)]
ImageRef = Annotated[str, AfterValidator(formats.validate_image)]
RepoId = Annotated[str, AfterValidator(formats.repo_id)]
ChartVersion = Annotated[str, AfterValidator(formats.exact_chart_version)]
FilePath = Annotated[str, AfterValidator(formats.file_path)]
PrintableName = Annotated[str, AfterValidator(formats.printable_name)]
PemPublic = Annotated[str, AfterValidator(formats.pem_public)]
RepoPath = Annotated[str, AfterValidator(formats.repo_relative_path)]
NicName = Annotated[str, AfterValidator(formats.nic_name)]
KernelName = Annotated[str, AfterValidator(formats.kernel_name)]
EcrCacheSecretArn = Annotated[str, AfterValidator(formats.ecr_cache_secret_arn)]
Ipv4Cidr = Annotated[str, AfterValidator(formats.ipv4_cidr)]
KmsKey = Annotated[str, AfterValidator(formats.kms_key)]

# Bounds shared by several keys, each with the reason it holds.
# Nodes of one pool: Kubernetes supports clusters of at most 5,000 nodes
# (https://kubernetes.io/docs/setup/best-practices/cluster-large/).
MAX_NODES = 5000
# Serving replicas of one model (fixed or autoscaled); each is at least one GPU.
MAX_REPLICAS = 100
# Entries of a list in the stack file (pools, models): far above any real stack, low enough that
# planning every entry stays quick.
MAX_ENTRIES = 100
# Tokens of context or of a batch: 2^24 is above every published context length (Llama 4 Scout:
# 10,485,760) and keeps the sizing arithmetic in exact floats.
MAX_TOKENS = 2**24
