"""Peak compute and interconnect of each catalog GPU, for the performance model (planner/perf_model.py).

Each figure is the vendor's datasheet number. NVIDIA quotes Tensor Core throughput "with sparsity"
(2:4 structured sparsity, which LLM serving does not use); the dense figure is half of it, and only
the dense figure is stored. Memory bandwidth stays in common/gpus.py (`memory_bandwidth_gbps`); the
datasheet that states it is named here beside the compute figures.

Interconnect: the datasheets give NVLink as a bidirectional total (H100/H200 900 GB/s, A100 600 GB/s)
and PCIe Gen4 x16 as "64GB/s bidirectional"; a ring all-reduce moves data one way per link, so the
model uses half the datasheet figure.

A GPU whose datasheet figure is missing here is `Fact(established=False)`: the model refuses to
predict for it unless the caller passes the figure (`--peak-tflops`), and says how to measure it.
"""

from __future__ import annotations

from dataclasses import dataclass

from common.facts import Fact

# A BF16 GEMM large enough to saturate the tensor cores, run on the GPU itself: the achieved figure
# is a lower bound of the peak, which is what an unresolved peak can be replaced with.
MEASURE_TFLOPS = (
    "python3 -c \"import torch,time;a=torch.randn(8192,8192,device='cuda',dtype=torch.bfloat16);"
    "torch.mm(a,a);torch.cuda.synchronize();t=time.perf_counter();[torch.mm(a,a) for _ in range(50)];"
    'torch.cuda.synchronize();print(2*8192**3*50/(time.perf_counter()-t)/1e12)"'
)
MEASURE_ALLREDUCE = "all_reduce_perf -b 1M -e 64M -g <tp> (NVIDIA/nccl-tests); read busbw"

_H100 = "https://www.nvidia.com/en-us/data-center/h100/ (H100 SXM column; '* With sparsity')"
_H200 = "https://www.nvidia.com/en-us/data-center/h200/ (H200 SXM column; '* With sparsity')"
_A100 = (
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
    "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf (A100 SXM: BFLOAT16 Tensor Core 312 | 624*)"
)
_L4 = "https://www.nvidia.com/en-us/data-center/l4/ (BF16 Tensor Core 242*, FP8 485*; '* With sparsity')"
_L40S = "https://www.nvidia.com/en-us/data-center/l40s/ (BF16 Tensor Core 362.05 | 733*, FP8 733 | 1,466*)"


@dataclass(frozen=True)
class GpuPeak:
    """What one GPU can do at best: dense tensor TFLOPS per dtype and its link to the others."""

    name: str
    # Architecture family: the efficiency factors are calibrated per family (perf_model.EFFICIENCY).
    family: str
    bf16_tflops: Fact
    # None when the GPU has no FP8 tensor cores (Ampere): FP8 weights then run as weight-only kernels.
    fp8_tflops: Fact | None
    # One-way GB/s between two GPUs of one machine (half the datasheet's bidirectional figure).
    link_gbps: Fact
    bandwidth_source: str

    @staticmethod
    def number(fact: Fact | None) -> float | None:
        return float(fact.value) if fact is not None and fact.value is not None else None


def _f(subject: str, value: float | None, source: str, resolve: str | None = None) -> Fact:
    return Fact(subject, None if value is None else f"{value:g}", source, resolve is None, resolve)


def _gpu(name, family, bf16, fp8, link, link_source, bw_source, resolve=None, link_resolve=None) -> GpuPeak:
    return GpuPeak(
        name,
        family,
        _f(f"{name} dense BF16 TFLOPS", bf16, bw_source, resolve),
        None if fp8 is False else _f(f"{name} dense FP8 TFLOPS", fp8, bw_source, resolve),
        _f(f"{name} one-way GPU-to-GPU GB/s", link, link_source, link_resolve),
        bw_source,
    )


_PCIE4 = "PCIe Gen4 x16: 64GB/s bidirectional (same datasheet)"
_UNRESOLVED_BLACKWELL = f"vendor per-GPU dense figure not checked; measure: {MEASURE_TFLOPS}"

PEAKS: dict[str, GpuPeak] = {
    p.name: p
    for p in (
        _gpu("H100-80GB", "hopper", 989.5, 1979.0, 450.0, f"{_H100}: NVLink 900GB/s", _H100),
        _gpu("H200", "hopper", 989.5, 1979.0, 450.0, f"{_H200}: NVLink 900GB/s", _H200),
        _gpu("A100-80GB", "ampere", 312.0, False, 300.0, f"{_A100}: NVLink 600GB/s", _A100),
        _gpu("A100-40GB", "ampere", 312.0, False, 300.0, f"{_A100}: NVLink 600GB/s", _A100),
        _gpu("L4", "ada", 121.0, 242.5, 32.0, f"{_L4}: {_PCIE4}", _L4),
        _gpu("L40S", "ada", 362.05, 733.0, 32.0, f"{_L40S}: {_PCIE4}", _L40S),
        # AWS's A10G is not on NVIDIA's public datasheets (the A10 is a different card).
        _gpu(
            "A10G",
            "ampere",
            None,
            False,
            None,
            "no public datasheet for the A10G's PCIe link",
            "no NVIDIA datasheet names the A10G",
            resolve=f"on a g5 node: {MEASURE_TFLOPS}",
            link_resolve=f"on a g5.12xlarge: {MEASURE_ALLREDUCE}",
        ),
        _gpu(
            "B200",
            "blackwell",
            None,
            None,
            None,
            "HGX B200 NVLink figure not checked",
            "https://www.nvidia.com/en-us/data-center/hgx/ (per-GPU dense figures not checked)",
            resolve=_UNRESOLVED_BLACKWELL,
            link_resolve=f"on a p6-b200.48xlarge: {MEASURE_ALLREDUCE}",
        ),
        _gpu(
            "RTX-PRO-6000",
            "blackwell",
            None,
            None,
            None,
            "PCIe Gen5 link figure not checked",
            "RTX PRO 6000 Blackwell Server Edition datasheet not checked",
            resolve=_UNRESOLVED_BLACKWELL,
            link_resolve=MEASURE_ALLREDUCE,
        ),
        _gpu(
            "GB10",
            "blackwell",
            None,
            None,
            None,
            "single GPU: no GPU-to-GPU link",
            "DGX Spark datasheet states FP4 with sparsity only",
            resolve=_UNRESOLVED_BLACKWELL,
            link_resolve="not needed: one GPU per machine",
        ),
    )
}


def unresolved(peak: GpuPeak) -> list[Fact]:
    facts = [peak.bf16_tflops, peak.link_gbps] + ([peak.fp8_tflops] if peak.fp8_tflops is not None else [])
    return [f for f in facts if not f.established]
