"""The regions each cloud has, so a region that does not exist is refused with the key, before any plan.

A region the cloud lacks (`us-east-9`) has the shape of a real one, so a format check lets it through and the mock
runtime of the offline plan gives it zones; `pulumi up` would fail only at the first API call. The lists below are
the clouds' published regions; a region opened after a list was read is refused until it is added here (the error
says so), which is the safer failure: a region name that is a typo never reaches the cloud.

- AWS: https://docs.aws.amazon.com/global-infrastructure/latest/regions/aws-regions.html ("AWS Regions": the code
  of every Region), as the AWS SDK's partition table lists them
  (aws/aws-sdk-js-v3@685ff5d03588f81121c6fa9466771cd444492209
  packages/util-endpoints/src/lib/aws/partitions.json: partitions aws, aws-cn, aws-us-gov, aws-iso, aws-iso-b,
  aws-iso-e, aws-iso-f, aws-eusc; their `*-global` pseudo-regions are not regions a cluster lives in). Settle a
  newer list with `aws account list-regions --region-opt-status-contains ENABLED ENABLED_BY_DEFAULT DISABLED
  --query 'Regions[].RegionName' --output text`.
- GCP: https://cloud.google.com/compute/docs/regions-zones ("Available regions and zones"). Not compared with a
  live project's list here; `gcloud compute regions list --format='value(name)'` settles it.
"""

from __future__ import annotations

AWS_REGIONS_SOURCE = (
    "https://docs.aws.amazon.com/global-infrastructure/latest/regions/aws-regions.html; "
    "aws/aws-sdk-js-v3@685ff5d03588f81121c6fa9466771cd444492209 packages/util-endpoints/src/lib/aws/partitions.json"
)
GCP_REGIONS_SOURCE = "https://cloud.google.com/compute/docs/regions-zones"

AWS_REGIONS = frozenset(
    {
        # aws
        "af-south-1",
        "ap-east-1",
        "ap-northeast-1",
        "ap-northeast-2",
        "ap-northeast-3",
        "ap-south-1",
        "ap-south-2",
        "ap-southeast-1",
        "ap-southeast-2",
        "ap-southeast-3",
        "ap-southeast-4",
        "ap-southeast-5",
        "ap-southeast-7",
        "ca-central-1",
        "ca-west-1",
        "eu-central-1",
        "eu-central-2",
        "eu-north-1",
        "eu-south-1",
        "eu-south-2",
        "eu-west-1",
        "eu-west-2",
        "eu-west-3",
        "il-central-1",
        "me-central-1",
        "me-south-1",
        "mx-central-1",
        "sa-east-1",
        "us-east-1",
        "us-east-2",
        "us-west-1",
        "us-west-2",
        # aws-cn
        "cn-north-1",
        "cn-northwest-1",
        # aws-us-gov
        "us-gov-east-1",
        "us-gov-west-1",
        # aws-iso, aws-iso-b, aws-iso-e, aws-iso-f
        "us-iso-east-1",
        "us-iso-west-1",
        "us-isob-east-1",
        "eu-isoe-west-1",
        "us-isof-east-1",
        "us-isof-south-1",
        # aws-eusc
        "eusc-de-east-1",
    }
)

GCP_REGIONS = frozenset(
    {
        "africa-south1",
        "asia-east1",
        "asia-east2",
        "asia-northeast1",
        "asia-northeast2",
        "asia-northeast3",
        "asia-south1",
        "asia-south2",
        "asia-southeast1",
        "asia-southeast2",
        "asia-southeast3",
        "australia-southeast1",
        "australia-southeast2",
        "europe-central2",
        "europe-north1",
        "europe-north2",
        "europe-southwest1",
        "europe-west1",
        "europe-west2",
        "europe-west3",
        "europe-west4",
        "europe-west6",
        "europe-west8",
        "europe-west9",
        "europe-west10",
        "europe-west12",
        "me-central1",
        "me-central2",
        "me-west1",
        "northamerica-northeast1",
        "northamerica-northeast2",
        "northamerica-south1",
        "southamerica-east1",
        "southamerica-west1",
        "us-central1",
        "us-east1",
        "us-east4",
        "us-east5",
        "us-south1",
        "us-west1",
        "us-west2",
        "us-west3",
        "us-west4",
    }
)

REGIONS = {"aws": AWS_REGIONS, "gcp": GCP_REGIONS}
SOURCES = {"aws": AWS_REGIONS_SOURCE, "gcp": GCP_REGIONS_SOURCE}
