"""What a GPU machine costs per hour, on-demand and spot, per cloud and region, with where each price is read.

A price is a public fact that changes (AWS and Google revise GPU prices, spot prices move with supply), so every
entry carries the page it is read on and the date it was read. A price that is not established from such a page is
kept as unresolved: `usd_per_hour` is None and `resolve_with` is the command that reads it from the cloud's own
price API. The offline plan prints the table's figure where there is one and "unresolved" with that command where
there is not; it never prints a number this table does not hold.

The public price pages:
- AWS on-demand: https://aws.amazon.com/ec2/pricing/on-demand/ (per region; the Price List API behind it:
  https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/price-changes.html);
- AWS spot: https://aws.amazon.com/ec2/spot/pricing/ (per region and per zone, set by EC2 and moving with long-term
  supply and demand; the history per zone: `aws ec2 describe-spot-price-history`);
- GCP on-demand: https://cloud.google.com/compute/vm-instance-pricing (accelerator-optimized machine types: the GPUs,
  vCPUs and memory of a G2/A2/A3 machine are priced together, per region);
- GCP spot: https://cloud.google.com/spot-vms/pricing (per region; Google may change a spot price up to once a day).

Standard library and common/gpus (the catalog it lists) only: the planner, the offline plan and the policy pack
may read it.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from common import gpus

ON_DEMAND = "on-demand"
SPOT = "spot"
CAPACITY_TYPES = (ON_DEMAND, SPOT)

PRICE_PAGES = {
    ("aws", ON_DEMAND): "https://aws.amazon.com/ec2/pricing/on-demand/",
    ("aws", SPOT): "https://aws.amazon.com/ec2/spot/pricing/",
    ("gcp", ON_DEMAND): "https://cloud.google.com/compute/vm-instance-pricing",
    ("gcp", SPOT): "https://cloud.google.com/spot-vms/pricing",
}

# The Cloud Billing Catalog API's service id of Compute Engine, as Google's examples of the API write it
# (https://cloud.google.com/billing/docs/how-to/get-pricing-information-api); unverified against the API here:
# `curl -s "https://cloudbilling.googleapis.com/v1/services?key=$API_KEY" | jq '.services[] | select(.displayName ==
# "Compute Engine") | .serviceId'` settles it.
GCP_COMPUTE_SERVICE = "6F81-5844-456A"


@dataclass(frozen=True)
class MachinePrice:
    """One machine type's hourly price in one region for one capacity type, in US dollars."""

    cloud: str
    machine: str
    region: str
    capacity: str
    # None while the price is not read from `source` (unresolved).
    usd_per_hour: float | None
    # The public page the price is read on.
    source: str
    # The date (YYYY-MM-DD) the page was read for this entry, or the date it was found not to be readable.
    checked: str
    # On a machine with the cloud's CLI and credentials: the command whose output settles the price.
    resolve_with: str

    def __post_init__(self) -> None:
        if self.capacity not in CAPACITY_TYPES:
            raise ValueError(f"capacity {self.capacity!r} is not one of {CAPACITY_TYPES}")
        if self.usd_per_hour is None:
            return
        what = f"{self.machine} {self.region or '(no region)'} {self.capacity}"
        if self.usd_per_hour <= 0:
            raise ValueError(f"{what}: a price is positive")
        # A figure is only as good as its citation: the page it is read on, the region it is for, and the date.
        if not self.source.startswith("https://"):
            raise ValueError(f"{what}: a price names the https:// page it is read on, not {self.source!r}")
        if not self.region:
            raise ValueError(f"{what}: a price names its region")
        try:
            datetime.date.fromisoformat(self.checked)
        except ValueError:
            raise ValueError(
                f"{what}: `checked` is the date (YYYY-MM-DD) the page states or was read, not {self.checked!r}"
            ) from None

    @property
    def established(self) -> bool:
        return self.usd_per_hour is not None


def resolve_command(cloud: str, machine: str, region: str, capacity: str) -> str:
    """The command that reads this price from the cloud's own price API."""
    if cloud == "aws" and capacity == ON_DEMAND:
        # The Price List API answers from us-east-1 for every region; one instance type, Linux, shared tenancy.
        return (
            "aws pricing get-products --region us-east-1 --service-code AmazonEC2 --filters "
            f"Type=TERM_MATCH,Field=instanceType,Value={machine} Type=TERM_MATCH,Field=regionCode,Value={region} "
            "Type=TERM_MATCH,Field=operatingSystem,Value=Linux Type=TERM_MATCH,Field=tenancy,Value=Shared "
            "Type=TERM_MATCH,Field=preInstalledSw,Value=NA Type=TERM_MATCH,Field=capacitystatus,Value=Used"
        )
    if cloud == "aws":
        return (
            f"aws ec2 describe-spot-price-history --region {region} --instance-types {machine} "
            '--product-descriptions "Linux/UNIX" --start-time "$(date -u +%Y-%m-%dT%H:%M:%SZ)"'
        )
    # GCP prices a G2/A2/A3 machine as its GPUs + vCPUs + memory: the series' core and RAM SKUs and the GPU's SKU in
    # the region (the Catalog API's SKU: description, pricingInfo[].pricingExpression.tieredRates[].unitPrice and
    # usageUnit); spot SKUs are described "Spot Preemptible ...". Multiply by the machine's vCPUs, GiB and GPUs.
    series = machine.split("-", 1)[0].upper()
    spot = "" if capacity == SPOT else " | not"
    return (
        "curl -s "
        f'"https://cloudbilling.googleapis.com/v1/services/{GCP_COMPUTE_SERVICE}/skus?key=$API_KEY&pageSize=5000" | '
        f'jq \'.skus[] | select(.serviceRegions | index("{region}")) | '
        f'select(.description | test("Preemptible"){spot}) | select(.description | test("{series} |Nvidia")) | '
        "{description, unit: .pricingInfo[0].pricingExpression.usageUnit, "
        "usd: (.pricingInfo[0].pricingExpression.tieredRates[-1].unitPrice | (.units | tonumber) + .nanos / 1e9)}'"
        f"  # {machine}: its vCPUs x the core price + its GiB x the RAM price + its GPUs x the GPU price"
    )


def _unresolved(cloud: str, machine: str, region: str, capacity: str, checked: str) -> MachinePrice:
    return MachinePrice(
        cloud,
        machine,
        region,
        capacity,
        None,
        PRICE_PAGES[(cloud, capacity)],
        checked,
        resolve_command(cloud, machine, region, capacity),
    )


# The committed stacks' regions (Pulumi.prod.yaml: us-east-1; Pulumi.dev.yaml: us-central1) and every catalog machine
# of each cloud (common/gpus.py), both capacity types. Read on 2026-12-04, the on-demand and spot pages above and
# https://cloud.google.com/compute/gpus-pricing gave their prose but not their machines' price tables (the browser
# renders those from the clouds' price APIs; the GCP spot page's per-vCPU and per-GiB table names neither its region
# nor a date), so none of them states a readable figure for one of these machines in these regions; and no copy of
# the AWS Price List offer file (which states its publication date) was found at a citable address; the live file is
# https://pricing.us-east-1.amazonaws.com/offers/v1.0/aws/AmazonEC2/current/us-east-1/index.json. Spot prices move
# (AWS: per zone, with supply and demand; GCP: up to once a day) and no page gives a dated figure. Every entry is
# therefore unresolved until the command beside it is run: put the figure it answers here as `usd_per_hour`, with
# the page or offer file as `source` and the date it states or was read as `checked` (MachinePrice refuses a figure
# without an https:// source, a region and a date).
_CHECKED = "2026-12-04"
REGIONS = {"aws": "us-east-1", "gcp": "us-central1"}


def _catalog_machines(cloud: str) -> tuple[str, ...]:
    return tuple(sorted({m.name for g in gpus.CATALOG.values() for m in g.machines(cloud)}))


PRICES: dict[tuple[str, str, str, str], MachinePrice] = {
    (p.cloud, p.machine, p.region, p.capacity): p
    for p in (
        _unresolved(cloud, machine, region, capacity, _CHECKED)
        for cloud, region in REGIONS.items()
        for machine in _catalog_machines(cloud)
        for capacity in CAPACITY_TYPES
    )
}


def price(cloud: str, machine: str, region: str, capacity: str) -> MachinePrice | None:
    """The table's price of `machine` in `region`; an unresolved entry (with its command) for a machine the table
    does not list; None where no public price applies (an existing cluster's nodes, another cloud)."""
    if (cloud, capacity) not in PRICE_PAGES:
        return None
    found = PRICES.get((cloud, machine, region, capacity))
    if found is not None:
        return found
    return _unresolved(cloud, machine, region, capacity, checked="not in the table")
