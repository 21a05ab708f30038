"""The GPU catalog: what each accelerator really offers, and which cloud machines carry it.

Memory is the figure CUDA reports (`torch.cuda.mem_get_info()[1]`, which vLLM logs as the total),
not the marketing number: an "80 GB" H100 reports 79.19 GiB, and sizing against 80 would promise
KV cache that does not exist.

Every CUDA total either cites a log that states it for a named GPU (`cuda_total_source`) or is
marked unconfirmed (`cuda_total_source=None`): then it is the framebuffer nvidia-smi shows less the
few hundred MiB the driver keeps back, which can be off by up to about 1%, and the offline plan
says so in plan.md for every model it sizes against such a figure. When a log states a total,
put it here with its source; `python -m components.sizing --gpu-memory-gib` sizes against a
measured figure meanwhile. The command that measures one on a node of the pool:

    python3 -c "import torch; print(torch.cuda.mem_get_info()[1] / 1024**3)"

Interconnect (what joins the GPUs of one machine), which decides the memory NCCL takes
(planner/sizing.py):
- NVSwitch: HGX A100/H100/H200/B200 8-GPU baseboards ("Platform Support for NVIDIA NVSwitch",
  https://docs.nvidia.com/ai-enterprise/release-8/8.0/infra-software/vgpu/features/nvswitch.html,
  which adds that multicast, the base of NCCL's NVLS, exists on Hopper and Blackwell only); on AWS
  "A100 (P4), H100(P5), B200(P6) ... systems have NVSwitches"
  (https://github.com/aws/aws-parallelcluster-cookbook/pull/3018, cookbooks/.../nvidia.rb); on GCP
  the A2/A3 GPUs are "NVLink Full Mesh @ 600/900 GBps" (GCP's GPU table as quoted in
  https://huggingface.co/spaces/Elfsong/gcp_allocator/commit/3a1a5af88c8fd7c36675800b52069eaf40fed2b4).
- PCIe: AWS's GPU table lists g5.12xlarge/24xlarge A10Gs as "PCIe"
  (https://gist.github.com/shashankprasanna/10ebe6dc1ba1d8d93db17da4e2cc890e); GCP's lists L4 as
  "N/A" (no NVLink); L40S has no NVLink (vLLM's docs as quoted in kubesimplify/website@8b1d2a5c
  content/blog/running-a-single-llm-across-two-gpus-with-vllm.md: "if the GPUs on the node do not
  have NVLINK interconnect (e.g. L40S)"); eight RTX PRO 6000 Server Edition cards show `SYS`
  between every pair in `nvidia-smi topo -m` (same post).
- Unified: GB10 (DGX Spark), where CPU and GPU share one memory.

Pure Python, no Pulumi import: the sizing CLI, the config validator and the policy pack use it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CloudMachine:
    """A machine type that carries `gpus` of one accelerator."""

    name: str
    gpus: int
    vcpus: int
    memory_gib: int
    # Local NVMe the machine offers for ephemeral storage (GKE local SSD / EC2 instance store).
    local_ssd_gib: int = 0
    # AWS only: the instance type supports Elastic Fabric Adapter (GPUDirect RDMA across nodes).
    efa: bool = False


@dataclass(frozen=True)
class Gpu:
    name: str
    # What CUDA reports as total device memory, in GiB (1024**3 bytes).
    cuda_total_gib: float
    # Peak memory bandwidth, GB/s (vendor datasheet).
    memory_bandwidth_gbps: float
    # Compute capability decides what vLLM kernels run (FP8 needs 8.9+).
    compute_capability: tuple[int, int]
    aws: tuple[CloudMachine, ...] = ()
    # GKE accelerator type name (`nvidia-l4`, ...) and the machine types that carry it.
    gcp_accelerator: str | None = None
    gcp: tuple[CloudMachine, ...] = field(default=())
    # Where a log states `cuda_total_gib` for this GPU (URL and the quoted figure); None = unconfirmed.
    cuda_total_source: str | None = None
    # What joins the GPUs of its multi-GPU machines: "nvswitch" or "pcie" (see the module docstring).
    multi_gpu_interconnect: str = "pcie"
    # CPU and GPU share one memory (GB10): vLLM counts host memory as the GPU's.
    unified_memory: bool = False

    @property
    def cuda_total_bytes(self) -> int:
        return int(self.cuda_total_gib * 1024**3)

    @property
    def cuda_total_confirmed(self) -> bool:
        return self.cuda_total_source is not None

    def interconnect(self, gpus_per_node: int) -> str:
        """What joins the GPUs one replica spans inside a node of this GPU."""
        if self.unified_memory:
            return "unified"
        return "single" if gpus_per_node <= 1 else self.multi_gpu_interconnect

    @property
    def supports_fp8(self) -> bool:
        return self.compute_capability >= (8, 9)

    def machines(self, cloud: str) -> tuple[CloudMachine, ...]:
        return {"aws": self.aws, "gcp": self.gcp}.get(cloud, ())


def _m(name: str, gpus: int, vcpus: int, memory_gib: int, local_ssd_gib: int = 0, efa: bool = False):
    return CloudMachine(name, gpus, vcpus, memory_gib, local_ssd_gib, efa)


# Instance shapes: AWS EC2 accelerated-computing instance type pages (G5, G6, G6e, P4, P5, P5en,
# P6-B200); GCP "GPU machine types" page (G2, A2, A3, A4). Local SSD on GCP is what the machine
# type bundles or the minimum it allows attaching.
CATALOG: dict[str, Gpu] = {
    gpu.name: gpu
    for gpu in (
        Gpu(
            # On AWS (Linux-5.15.0-1067-aws, driver 535.161.07), the g5 machines below. An NVIDIA A10,
            # a different card, reads 22.06 GiB (vllm-project/vllm#928), and a vLLM CI log on an
            # unnamed GPU 22.05 GiB (vllm-project/vllm#20214); neither is an A10G.
            "A10G",
            21.99,
            600,
            (8, 6),
            cuda_total_source=(
                'https://github.com/vllm-project/vllm/issues/8073 ("GPU 0 has a total capacity of '
                '21.99 GiB", collect_env: "GPU 0: NVIDIA A10G")'
            ),
            aws=(
                _m("g5.xlarge", 1, 4, 16, 250),
                _m("g5.2xlarge", 1, 8, 32, 450),
                _m("g5.4xlarge", 1, 16, 64, 600),
                _m("g5.8xlarge", 1, 32, 128, 900),
                _m("g5.16xlarge", 1, 64, 256, 1900),
                _m("g5.12xlarge", 4, 48, 192, 3800),
                _m("g5.24xlarge", 4, 96, 384, 3800),
                _m("g5.48xlarge", 8, 192, 768, 7600),
            ),
        ),
        Gpu(
            # "GPU 0 has a total capacity of 21.96 GiB" with "GPU 0: NVIDIA L4" (4 x L4 on AWS,
            # driver 535.183.01). A vLLM CI log on an unnamed 22.05 GiB GPU suggests the figure moves
            # by ~0.1 GiB with the driver; the smaller one is kept.
            "L4",
            21.96,
            300,
            (8, 9),
            cuda_total_source=(
                'https://github.com/vllm-project/vllm/issues/12539 ("GPU 0 has a total capacity of '
                '21.96 GiB", collect_env: "GPU 0: NVIDIA L4")'
            ),
            aws=(
                _m("g6.xlarge", 1, 4, 16, 250),
                _m("g6.2xlarge", 1, 8, 32, 450),
                _m("g6.4xlarge", 1, 16, 64, 600),
                _m("g6.8xlarge", 1, 32, 128, 900),
                _m("g6.16xlarge", 1, 64, 256, 1880),
                _m("g6.12xlarge", 4, 48, 192, 3760),
                _m("g6.24xlarge", 4, 96, 384, 3760),
                _m("g6.48xlarge", 8, 192, 768, 7520),
            ),
            gcp_accelerator="nvidia-l4",
            gcp=(
                _m("g2-standard-4", 1, 4, 16, 375),
                _m("g2-standard-8", 1, 8, 32, 375),
                _m("g2-standard-12", 1, 12, 48, 375),
                _m("g2-standard-16", 1, 16, 64, 375),
                _m("g2-standard-32", 1, 32, 128, 375),
                _m("g2-standard-24", 2, 24, 96, 750),
                _m("g2-standard-48", 4, 48, 192, 1500),
                _m("g2-standard-96", 8, 96, 384, 3000),
            ),
        ),
        Gpu(
            "L40S",
            44.42,
            864,
            (8, 9),
            cuda_total_source=(
                "https://github.com/tim-roethig/ai-platform/blob/7c54612e18653a2d2ccc125072c093010d89691b/"
                'platform/benchmarks/qwen3_235b_on_8xl40s.md ("Free memory on device (43.93/44.42 GiB)", '
                "nvidia-smi in the same file: NVIDIA L40S)"
            ),
            aws=(
                _m("g6e.xlarge", 1, 4, 32, 250),
                _m("g6e.2xlarge", 1, 8, 64, 450),
                _m("g6e.4xlarge", 1, 16, 128, 600),
                _m("g6e.8xlarge", 1, 32, 256, 900),
                _m("g6e.16xlarge", 1, 64, 512, 1900),
                _m("g6e.12xlarge", 4, 48, 384, 3800),
                _m("g6e.24xlarge", 4, 96, 768, 3800),
                _m("g6e.48xlarge", 8, 192, 1536, 7600),
            ),
        ),
        Gpu(
            # The SXM4 part that p4d and a2-highgpu machines carry. The source is CUDA's deviceQuery,
            # whose global-memory total is the figure torch.cuda.mem_get_info()[1] reports:
            # 42298834944 bytes / 1024**3 = 39.394 GiB. Logs that do not name their GPU also show
            # 39.49 and 39.56 GiB (other SKUs or drivers, perhaps); the SXM4 figure is kept.
            "A100-40GB",
            39.39,
            1555,
            (8, 0),
            multi_gpu_interconnect="nvswitch",
            cuda_total_source=(
                "https://github.com/bottlerocket-os/bottlerocket/pull/3873 (deviceQuery: "
                '"Device 2: \\"NVIDIA A100-SXM4-40GB\\"", "Total amount of global memory: '
                '40339 MBytes (42298834944 bytes)" = 39.39 GiB)'
            ),
            aws=(_m("p4d.24xlarge", 8, 96, 1152, 8000, efa=True),),
            gcp_accelerator="nvidia-tesla-a100",
            gcp=(
                _m("a2-highgpu-1g", 1, 12, 85, 375),
                _m("a2-highgpu-2g", 2, 24, 170, 375),
                _m("a2-highgpu-4g", 4, 48, 340, 375),
                _m("a2-highgpu-8g", 8, 96, 680, 375),
                _m("a2-megagpu-16g", 16, 96, 1360, 375),
            ),
        ),
        Gpu(
            # The SXM4 part that p4de and a2-ultragpu machines carry. 79.15 GiB also appears, in logs that
            # do not name their GPU (an A100 80GB PCIe, perhaps).
            "A100-80GB",
            79.25,
            2039,
            (8, 0),
            multi_gpu_interconnect="nvswitch",
            cuda_total_source=(
                "https://github.com/LukeJYK/AutoScientists/blob/e3133549cf9561e4649b382f4f2e17e97e79cc6a/"
                'vllm.log ("Free memory on device (78.84/79.25 GiB) on startup", and the fused-MoE '
                "config path of the same log: device_name=NVIDIA_A100-SXM4-80GB)"
            ),
            aws=(_m("p4de.24xlarge", 8, 96, 1152, 8000, efa=True),),
            gcp_accelerator="nvidia-a100-80gb",
            gcp=(
                _m("a2-ultragpu-1g", 1, 12, 170, 375),
                _m("a2-ultragpu-2g", 2, 24, 340, 750),
                _m("a2-ultragpu-4g", 4, 48, 680, 1500),
                _m("a2-ultragpu-8g", 8, 96, 1360, 3000),
            ),
        ),
        Gpu(
            "H100-80GB",
            79.19,
            3350,
            (9, 0),
            multi_gpu_interconnect="nvswitch",
            cuda_total_source=(
                "https://github.com/llm-d-incubation/llm-d-planner/blob/d3121e059da88662db39a926a3ead964be97359b/"
                'accuracy/results/v0.19.0/logs/ ("worker init memory snapshot: ... total_memory=79.19GiB")'
            ),
            aws=(
                _m("p5.4xlarge", 1, 16, 256, 3800),
                _m("p5.48xlarge", 8, 192, 2048, 30400, efa=True),
            ),
            gcp_accelerator="nvidia-h100-80gb",
            gcp=(
                _m("a3-highgpu-1g", 1, 26, 234, 750),
                _m("a3-highgpu-2g", 2, 52, 468, 1500),
                _m("a3-highgpu-4g", 4, 104, 936, 3000),
                _m("a3-highgpu-8g", 8, 208, 1872, 6000),
            ),
        ),
        Gpu(
            # TensorRT-LLM logs torch.cuda.mem_get_info()'s total (NVIDIA/TensorRT-LLM
            # tensorrt_llm/_torch/pyexecutor/resource_manager.py, calculate_max_num_blocks:
            # "free_mem, total_mem = torch.cuda.mem_get_info()"): 139.80084 GiB on the repository's
            # H200s. PyTorch OOM messages on other H200s read 139.81 GiB (another driver, perhaps),
            # and those found name no GPU or sit in files whose repository could not be identified;
            # as for the L4, the smaller figure is kept.
            "H200",
            139.80,
            4800,
            (9, 0),
            multi_gpu_interconnect="nvswitch",
            cuda_total_source=(
                "https://github.com/faradawn/bench3/blob/64ae4f53eaf341cac03be15bf7b0e59960310486/"
                'logs/trtllm-serve-egine.log ("free memory 122.65985107421875GiB of total memory '
                '139.80084228515625GiB", "device total memory 139.80 GiB"; README.md of the same '
                'repository: "**Hardware**: 2x H200 GPUs")'
            ),
            aws=(_m("p5en.48xlarge", 8, 192, 2048, 30400, efa=True),),
            gcp_accelerator="nvidia-h200-141gb",
            gcp=(_m("a3-ultragpu-8g", 8, 224, 2952, 12000),),
        ),
        Gpu(
            # The source queries cudaDeviceProp.totalGlobalMem (the figure torch.cuda.mem_get_info()[1]
            # reports) on a named B200. Its label says "GB" but the figure is GiB: 178.35 GiB is 191.5
            # GB, the 192 GB the part carries, whereas 178.35 decimal GB would fall short even of the
            # 180 GB clouds advertise (both figures: huggingface/huggingface.js#1539), and a CUDA total
            # exceeds the advertised figure (H100: 79.19 GiB = 85.0 GB, sold as 80 GB). 178.36 GiB also
            # appears, in logs that do not name their GPU (another driver, perhaps).
            "B200",
            178.35,
            8000,
            (10, 0),
            multi_gpu_interconnect="nvswitch",
            cuda_total_source=(
                'https://github.com/pytorch/ao/pull/4002 ("=== Device 0: NVIDIA B200 ===", '
                '"Total Global Memory: 178.35 GB", a GiB figure under a GB label)'
            ),
            aws=(_m("p6-b200.48xlarge", 8, 192, 2048, 30400, efa=True),),
            gcp_accelerator="nvidia-b200",
            gcp=(_m("a4-highgpu-8g", 8, 224, 3968, 12000),),
        ),
        Gpu(
            # For existing clusters (GCP's G4 machines carry it, but their GKE accelerator name was not
            # found, so no cloud machines are listed yet). Bandwidth: "approximately 1.8 TB/s"
            # (kubesimplify/website@c3935fb3 content/blog/bonsai-27b-rtx-pro-6000-dgx-spark.md).
            "RTX-PRO-6000",
            95.01,
            1800,
            (12, 0),
            cuda_total_source=(
                "https://github.com/kubesimplify/website/blob/8b1d2a5c3e94d3fad7aebfef7cecfa10b6bcc21b/"
                'content/blog/running-a-single-llm-across-two-gpus-with-vllm.md ("GPU 0: NVIDIA RTX PRO '
                '6000 Blackwell Server Edition 95.01 GiB sm_120")'
            ),
        ),
        Gpu(
            # DGX Spark, existing clusters only. The total moves with the host's own use of the
            # shared memory (121.63 GiB is reported on another box). 273 GB/s: same post as above.
            "GB10",
            121.69,
            273,
            (12, 1),
            unified_memory=True,
            cuda_total_source=(
                "https://github.com/kubesimplify/website/blob/75e403657199c4aa151273e0cb816deccc75f23e/"
                'content/blog/qwen3-8-27b-on-dgx-spark.md (vLLM: "Free memory 74.82/121.69 GiB is less '
                'than desired 0.8 utilization")'
            ),
        ),
    )
}


class UnknownGpuError(ValueError):
    pass


def get_gpu(name: str) -> Gpu:
    """Look a GPU up by catalog name; the error lists the names that exist."""
    try:
        return CATALOG[name]
    except KeyError:
        raise UnknownGpuError(f"unknown GPU {name!r}; known GPUs: {', '.join(CATALOG)}") from None


def find_machine(cloud: str, machine_type: str) -> tuple[Gpu, CloudMachine] | None:
    """The GPU and shape behind a cloud machine type, or None when it carries no catalog GPU."""
    for gpu in CATALOG.values():
        for machine in gpu.machines(cloud):
            if machine.name == machine_type:
                return gpu, machine
    return None


def default_machine(gpu: Gpu, cloud: str, gpus_per_node: int) -> CloudMachine | None:
    """The smallest machine of `cloud` that carries exactly `gpus_per_node` of `gpu`."""
    fitting = [m for m in gpu.machines(cloud) if m.gpus == gpus_per_node]
    return min(fitting, key=lambda m: (m.vcpus, m.memory_gib), default=None)


# ---------------------------------------------------------------------------------------------
# MIG profiles: what one slice of a GPU offers when every GPU of a node is cut alike
# (`nvidia.com/mig.config: all-<profile>`), so sizing can plan against the slice, not the GPU.
#
# Profile names, each profile's fraction of the GPU's memory (in eighths) and how many instances of
# it one GPU holds: NVIDIA MIG User Guide, "Supported MIG Profiles" tables for A100-SXM4-40GB,
# A100-SXM4-80GB, H100 80GB and H200 141GB
# (https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html; media
# extension "+me" variants left out: one per GPU, so `all-<profile>` cannot use them).
#
# Memory in GiB: what the driver reports for the smallest (1/8) slice, times the profile's eighths,
# rounded down, so a plan never counts on memory a slice does not have. The driver keeps some of
# each slice back, so a slice has less than 1/8 of the CUDA total. 1/8-slice readings used
# (`nvidia-smi mig -lgip`, memory column, GiB):
# - A100-40GB 1g.5gb: 4.75 (NVIDIA/mig-parted README, "List GPU instance profiles"; there 2g.10gb
#   reads 9.75 and 3g.20gb 19.62, both above 2x and 4x the 1/8 figure);
# - H100-80GB 1g.10gb: 9.62 (an H100 PCIe listing where 2g.20gb reads 19.50 and 3g.40gb 39.25);
# - H200 1g.18gb: 16.00 (reported for "NVIDIA H200 MIG 1g.18gb" slices);
# - A100-80GB: no reading found; its 1/8 slice is taken as the profile's name figure, 10 GB =
#   9.31 GiB, below the 9.62 an H100 1g.10gb slice of the same 80 GB class reads.
# Replace a figure when a log of vLLM on that slice states its CUDA total.


@dataclass(frozen=True)
class MigProfile:
    name: str  # e.g. "1g.10gb"
    memory_eighths: int  # share of the GPU's memory, in eighths
    instances: int  # slices of this profile one GPU holds (all-<profile>)
    memory_gib: float  # what one slice offers CUDA, GiB (see the note above)


def _mig_profiles(eighth_gib: float, *profiles: tuple[str, int, int]) -> dict[str, MigProfile]:
    return {
        name: MigProfile(name, eighths, instances, int(round(eighth_gib * eighths * 100, 6)) / 100)
        for name, eighths, instances in profiles
    }


MIG_PROFILES: dict[str, dict[str, MigProfile]] = {
    "A100-40GB": _mig_profiles(
        4.75,
        ("1g.5gb", 1, 7),
        ("1g.10gb", 2, 4),
        ("2g.10gb", 2, 3),
        ("3g.20gb", 4, 2),
        ("4g.20gb", 4, 1),
        ("7g.40gb", 8, 1),
    ),
    "A100-80GB": _mig_profiles(
        9.31,
        ("1g.10gb", 1, 7),
        ("1g.20gb", 2, 4),
        ("2g.20gb", 2, 3),
        ("3g.40gb", 4, 2),
        ("4g.40gb", 4, 1),
        ("7g.80gb", 8, 1),
    ),
    "H100-80GB": _mig_profiles(
        9.62,
        ("1g.10gb", 1, 7),
        ("1g.20gb", 2, 4),
        ("2g.20gb", 2, 3),
        ("3g.40gb", 4, 2),
        ("4g.40gb", 4, 1),
        ("7g.80gb", 8, 1),
    ),
    "H200": _mig_profiles(
        16.00,
        ("1g.18gb", 1, 7),
        ("1g.35gb", 2, 4),
        ("2g.35gb", 2, 3),
        ("3g.71gb", 4, 2),
        ("4g.71gb", 4, 1),
        ("7g.141gb", 8, 1),
    ),
}


def mig_profile(gpu_name: str, profile: str) -> MigProfile | None:
    """The MIG profile of a catalog GPU, or None when the GPU or the profile is not in the table."""
    return MIG_PROFILES.get(gpu_name, {}).get(profile)


def gpu_memory_gib_for(pool) -> float:
    """Memory one schedulable `nvidia.com/gpu` of a pool offers CUDA: the MIG slice when the pool
    has `migProfile`, else the GPU's CUDA total. `pool` is a config.PoolConfig (gpu, migProfile)."""
    profile_name = getattr(pool, "migProfile", None)
    if profile_name:
        profile = mig_profile(pool.gpu, profile_name)
        if profile is None:
            raise UnknownGpuError(f"{pool.gpu} has no MIG profile {profile_name!r}")
        return profile.memory_gib
    return get_gpu(pool.gpu).cuda_total_gib


def slices_per_gpu_for(pool) -> int:
    """How many `nvidia.com/gpu` one physical GPU of the pool advertises: its MIG slices, else 1
    (time-slicing replicas come on top, cluster-wide)."""
    profile_name = getattr(pool, "migProfile", None)
    if profile_name:
        profile = mig_profile(pool.gpu, profile_name)
        return profile.instances if profile else 1
    return 1


# ---------------------------------------------------------------------------------------------
# Which catalog GPU a CUDA-reported total belongs to.
#
# A total the user measured (or a log printed) is rarely the catalog's figure to the last digit: the
# driver and the SKU move it. The catalog's own sources and the logs noted beside its entries show
# how far for one GPU class (each figure is cited above):
# - A100-40GB 39.39 (deviceQuery, SXM4) against 39.49 and 39.56 in logs of unnamed A100s: 0.43%;
# - L4 21.96 against 22.05 in a vLLM CI log of an unnamed GPU: 0.41%;
# - A100-80GB 79.25 against 79.15 (an A100 80GB PCIe, perhaps): 0.13%;
# - GB10 121.69 against 121.63 on another box: 0.05%; H100-80GB 79.19 against the 79.18 of the
#   benyucong/neo4j-graphrag-python log (tests/fixtures/vllm_logs/held_out_by_source.yaml): 0.01%;
#   H200 139.80 against 139.81 and B200 178.35 against 178.36: under 0.01%.
# The tolerance is 0.5% of the catalog total, just above the widest of these. A total an ECC setting
# moves further (GDDR cards can switch ECC off and gain memory; no catalog source states the size
# of that change, unresolved: measure on the card with `nvidia-smi -e 0`, reboot, and the command in
# the module docstring) falls outside and is refused, never taken for another GPU.
CUDA_TOTAL_TOLERANCE = 0.005
# Logs print totals to 0.01 GiB; a figure within half of that is the catalog's own.
CUDA_TOTAL_ROUNDING_GIB = 0.005


@dataclass(frozen=True)
class TotalMatch:
    """The catalog GPUs a CUDA total may belong to: `gpu` when exactly one is taken, else None."""

    total_gib: float
    gpu: Gpu | None
    candidates: tuple[Gpu, ...]  # every entry within the tolerance, nearest first
    exact: bool  # the total is the catalog figure of `gpu` (to the logs' 0.01 GiB)

    def describe(self) -> str:
        """One line saying which GPU was taken and why (or why none was)."""
        if self.gpu is not None:
            how = (
                "its catalog CUDA total"
                if self.exact
                else f"within {CUDA_TOTAL_TOLERANCE:.1%} of its catalog total {self.gpu.cuda_total_gib:g} GiB"
            )
            others = [g for g in self.candidates if g is not self.gpu]
            also = (
                f"; also within {CUDA_TOTAL_TOLERANCE:.1%}: "
                + ", ".join(f"{g.name} ({g.cuda_total_gib:g} GiB)" for g in others)
                + ", pass --gpu if it is one of those"
                if others
                else ""
            )
            return f"{self.total_gib:g} GiB is {self.gpu.name} ({how}){also}"
        if self.candidates:
            names = " and ".join(f"{g.name} ({g.cuda_total_gib:g} GiB)" for g in self.candidates)
            return f"{self.total_gib:g} GiB is within {CUDA_TOTAL_TOLERANCE:.1%} of {names}"
        return f"{self.total_gib:g} GiB is not within {CUDA_TOTAL_TOLERANCE:.1%} of any catalog GPU's CUDA total"


def match_cuda_total(total_gib: float) -> TotalMatch:
    """The catalog GPU a CUDA-reported total belongs to.

    A total that is one entry's own figure is that GPU (its source is a log of it), even where another
    entry's tolerance reaches it (79.19 is the H100's, 0.08% from the A100-80GB's 79.25). Otherwise
    exactly one entry within the tolerance is taken; none, or two or more, leave `gpu` None.
    """
    near = sorted(
        (g for g in CATALOG.values() if abs(g.cuda_total_gib - total_gib) <= CUDA_TOTAL_TOLERANCE * g.cuda_total_gib),
        key=lambda g: abs(g.cuda_total_gib - total_gib),
    )
    exact = [g for g in near if abs(g.cuda_total_gib - total_gib) < CUDA_TOTAL_ROUNDING_GIB]
    if len(exact) == 1:
        return TotalMatch(total_gib, exact[0], tuple(near), True)
    if len(near) == 1:
        return TotalMatch(total_gib, near[0], tuple(near), False)
    return TotalMatch(total_gib, None, tuple(near), False)
