"""The stack file, read once: typed, validated, with errors that name the file, the key and the fix.

Owns: the schema of every section (cluster, pools, operators, model store, models, exposure,
monitoring, add-ons), the checks across sections, and turning Pulumi's config into a `StackConfig`. It is
the only package that reads Pulumi config.
May import: `common` (the contract, the GPU catalog, the pinned engine, the driver plan).
Imported by: the planner, the components, `__main__.py` and the offline plan; never by `common`,
`endpoint_tools` or `policies`.

The names below are its public face; the modules behind them each hold one concern.
"""

from stack_config.addons import AddOnName, AddonsConfig
from stack_config.cluster import (
    DEFAULT_REGIONS,
    GKE_DEFAULT_RWX_CLASS,
    GKE_FILESTORE_CLASSES,
    CapacityType,
    Cloud,
    ClusterConfig,
    NetworkConfig,
    PoolConfig,
    SystemPoolConfig,
    pool_machine,
)
from stack_config.errors import ConfigError
from stack_config.formats import default_model_name, validate_image
from stack_config.loader import PROJECT, SECRET_KEYS, LoadedConfig, decode_config_values, load, parse_stack_config
from stack_config.models import AutoscalingConfig, ModelConfig
from stack_config.operators import GpuOperatorConfig, NetworkOperatorConfig, OperatorsConfig
from stack_config.scaling import Autoscaler, PoolScaling, initial_nodes, pool_scaling
from stack_config.security import ClusterEndpointConfig, SecurityConfig
from stack_config.serving import (
    DOWNLOADER_IMAGE,
    ExposureConfig,
    GatewayConfig,
    LoadFrom,
    ModelStoreConfig,
    MonitoringConfig,
)
from stack_config.stack import EFA_NEEDS_PRIVATE_SUBNETS, StackConfig

__all__ = [
    "DEFAULT_REGIONS",
    "DOWNLOADER_IMAGE",
    "EFA_NEEDS_PRIVATE_SUBNETS",
    "GKE_DEFAULT_RWX_CLASS",
    "GKE_FILESTORE_CLASSES",
    "PROJECT",
    "SECRET_KEYS",
    "AddOnName",
    "AddonsConfig",
    "Autoscaler",
    "AutoscalingConfig",
    "CapacityType",
    "Cloud",
    "ClusterConfig",
    "ClusterEndpointConfig",
    "ConfigError",
    "ExposureConfig",
    "GatewayConfig",
    "GpuOperatorConfig",
    "LoadFrom",
    "LoadedConfig",
    "ModelConfig",
    "ModelStoreConfig",
    "MonitoringConfig",
    "NetworkConfig",
    "NetworkOperatorConfig",
    "OperatorsConfig",
    "PoolConfig",
    "PoolScaling",
    "SecurityConfig",
    "StackConfig",
    "SystemPoolConfig",
    "decode_config_values",
    "default_model_name",
    "initial_nodes",
    "load",
    "parse_stack_config",
    "pool_machine",
    "pool_scaling",
    "validate_image",
]
