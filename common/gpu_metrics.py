"""The GPU metrics the stack watches: DCGM exporter names, labels and the counters file it is given.

The GPU Operator (v26.7.0) runs the DCGM exporter `nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless`
(chart values.yaml line 304) and, unless told otherwise, points it at the image's
/etc/dcgm-exporter/dcp-metrics-included.csv (NVIDIA/gpu-operator@v26.7.0
assets/state-dcgm-exporter/0800_daemonset.yaml lines 47-48). That file leaves out what the GPU
alerts need: double-bit ECC errors, the throttling counters, the XID count per code, the memory's
own temperature limit. The exporter reads ONE counters file and nothing else, so the operator is
given a ConfigMap with every row of the default file plus those (`metrics_csv`); the ConfigMap is
created by components/operators/gpu_operator.py and named through `dcgmExporter.config.name`.

Names come from the DCGM exporter's own files (tests/fixtures/dcgm, provenance in
tests/fixtures/SOURCES.md). Standard library only: the operators layer writes the counters file
and the GPU alerts, the serving layer draws the GPU panels of each model's dashboard.
"""

from __future__ import annotations

# --- Series (a field's name is the series name the exporter exposes) --------------------------
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"  # % of time a kernel ran (gauge)
FB_USED = "DCGM_FI_DEV_FB_USED"  # framebuffer memory used, MiB (gauge)
FB_FREE = "DCGM_FI_DEV_FB_FREE"  # MiB (gauge)
POWER_USAGE = "DCGM_FI_DEV_POWER_USAGE"  # W (gauge)
GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"  # degrees C (gauge)
MEMORY_TEMP = "DCGM_FI_DEV_MEMORY_TEMP"  # HBM temperature, degrees C (gauge)
# "Maximum operating temperature for the memory of this GPU" (DCGM field 151, NVIDIA/DCGM
# dcgmlib/dcgm_fields.h), as the GPU itself reports it, so the alert compares MEMORY_TEMP with it
# instead of carrying a number per GPU model.
MEM_MAX_OP_TEMP = "DCGM_FI_DEV_MEM_MAX_OP_TEMP"
# The value of the LAST XID the driver raised (gauge); stays at that code until another XID.
XID_LAST = "DCGM_FI_DEV_XID_ERRORS"
# Exporter-computed: XIDs seen in the last window (default 5 min, --xid-count-window-size), one
# series per code in label `xid` (NVIDIA/dcgm-exporter internal/pkg/counters/const.go,
# internal/pkg/collector/xid_collector.go).
XID_COUNT = "DCGM_EXP_XID_ERRORS_COUNT"
XID_LABEL = "xid"
ECC_DBE_VOLATILE = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"  # double-bit ECC errors since the driver loaded (counter)
ROW_REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"  # 1 once row remapping failed (gauge)
# Time the clocks were held down, in NANOSECONDS since the driver loaded (counters): rate()/1e9
# is the share of time throttled. Unit: the counters file's help text "(in ns)" (corrected from
# "us" upstream in dcgm-exporter commit e61056b, "fix for violation time us->ns") and go-dcgm's
# field comments "Power Violation time in ns".
POWER_VIOLATION = "DCGM_FI_DEV_POWER_VIOLATION"
THERMAL_VIOLATION = "DCGM_FI_DEV_THERMAL_VIOLATION"
VIOLATION_UNITS_PER_SECOND = 1e9
# Bitmask of why the clocks are below their target right now (gauge), for confirming a throttle.
CLOCKS_EVENT_REASONS = "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"

# XID 79: "GPU has fallen off the bus" (NVIDIA/dcgm-exporter internal/pkg/collector/xid_errors.go).
XID_FELL_OFF_THE_BUS = 79

# --- Labels ----------------------------------------------------------------------------------
# Every GPU series carries gpu (index), UUID, pci_bus_id, device, modelName and Hostname = the
# node's name (NODE_NAME, set by the operator) (dcgm-exporter internal/pkg/rendermetrics/
# render_metrics.go line 47, internal/pkg/hostname/hostname.go line 53).
NODE_LABEL = "Hostname"
GPU_LABEL = "gpu"
UUID_LABEL = "UUID"
# With Kubernetes mapping on (the operator sets DCGM_EXPORTER_KUBERNETES=true), a GPU assigned to a
# pod also carries that pod's `namespace`, `pod` and `container` (internal/pkg/transformation/
# const.go lines 21-23). They collide with the scrape target's own namespace/pod labels, so the
# exporter's ServiceMonitor honours the exporter's labels (components/operators/values.py sets
# dcgmExporter.serviceMonitor.honorLabels); a model's dashboard then selects its GPUs by its pods.
WORKLOAD_NAMESPACE_LABEL = "namespace"
WORKLOAD_POD_LABEL = "pod"

# --- The counters file -----------------------------------------------------------------------
# The ConfigMap key the GPU Operator reads (controllers/object_controls.go line 137
# MetricsConfigFileName) and the file the exporter is pointed at.
METRICS_CONFIG_KEY = "dcgm-metrics.csv"

# Every enabled row of the exporter's default file, in its order: (field, type, help).
# Transcribed from NVIDIA/dcgm-exporter etc/dcp-metrics-included.csv (tests/fixtures/dcgm; a test
# compares this tuple with the fixture's uncommented rows, so the custom file never drops a
# default series a dashboard elsewhere may rely on).
DEFAULT_COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    (MEMORY_TEMP, "gauge", "Memory temperature (in C)."),
    (GPU_TEMP, "gauge", "GPU temperature (in C)."),
    (POWER_USAGE, "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    (GPU_UTIL, "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %)."),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %)."),
    (XID_LAST, "gauge", "Value of the last XID error encountered."),
    (FB_FREE, "gauge", "Framebuffer memory free (in MiB)."),
    (FB_USED, "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB)."),
    ("DCGM_FI_DEV_RETIRED_SBE", "counter", "Total number of retired pages due to single-bit errors."),
    ("DCGM_FI_DEV_RETIRED_DBE", "counter", "Total number of retired pages due to double-bit errors."),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "Total number of NVLink bandwidth counters for all lanes."),
    ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU License status"),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for uncorrectable errors"),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors"),
    (ROW_REMAP_FAILURE, "gauge", "Whether remapping of rows has failed"),
    ("DCGM_FI_DRIVER_VERSION", "label", "Driver Version"),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    (
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
    ),
    (
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "gauge",
        (
            "The rate of data transmitted over the PCIe bus - including both "
            "protocol headers and data payloads - in bytes per second."
        ),
    ),
    (
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "gauge",
        (
            "The rate of data received over the PCIe bus - including both "
            "protocol headers and data payloads - in bytes per second."
        ),
    ),
)

# What the alerts need on top. The first three rows are commented out in the default file (their
# help text is copied from there); the others are named in tests/fixtures/dcgm/FIELDS.md with
# where each name is defined.
ADDED_COUNTERS: tuple[tuple[str, str, str], ...] = (
    (ECC_DBE_VOLATILE, "counter", "Total number of double-bit volatile ECC errors."),
    (POWER_VIOLATION, "counter", "Throttling duration due to power constraints (in ns)."),
    (THERMAL_VIOLATION, "counter", "Throttling duration due to thermal constraints (in ns)."),
    (MEM_MAX_OP_TEMP, "gauge", "Maximum operating temperature for the memory of this GPU (in C)."),
    (CLOCKS_EVENT_REASONS, "gauge", "Current clock event (throttle) reasons as a bitmask."),
    (XID_COUNT, "gauge", "XID errors observed during the configured time window."),
)


def metrics_csv() -> str:
    """The counters file for the exporter: the default rows, then the ones the alerts add."""
    lines = [
        "# Format: DCGM FIELD, Prometheus metric type, help message",
        "# Written by llm-serving (common/gpu_metrics.py): the exporter's default",
        "# dcp-metrics-included.csv rows, then the fields the GPU alerts need.",
    ]
    for heading, rows in (("default", DEFAULT_COUNTERS), ("added for the GPU alerts", ADDED_COUNTERS)):
        lines.append(f"# {heading}")
        lines += [f"{field}, {kind}, {help_text}" for field, kind, help_text in rows]
    return "\n".join(lines) + "\n"


def series_names() -> set[str]:
    """Every series name the counters file makes the exporter expose (label-typed rows are not series)."""
    return {field for field, kind, _ in DEFAULT_COUNTERS + ADDED_COUNTERS if kind != "label"}
