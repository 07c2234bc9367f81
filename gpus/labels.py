"""Node labels of the NVIDIA GPU Operator: what GPU Feature Discovery reports and what MIG
Manager reads (``mig.config``) and writes (``mig.config.state``). See
reference/gpu-operator-facts.md."""

from __future__ import annotations

GPU_PRODUCT = "nvidia.com/gpu.product"
GPU_COUNT = "nvidia.com/gpu.count"
GPU_MEMORY = "nvidia.com/gpu.memory"
MIG_CAPABLE = "nvidia.com/mig.capable"
MIG_STRATEGY = "nvidia.com/mig.strategy"
# The layout MIG Manager applies, and how far it got: pending, success or failed. The state
# label is never cleared: remove it in the same patch that sets the config.
MIG_CONFIG = "nvidia.com/mig.config"
MIG_CONFIG_STATE = "nvidia.com/mig.config.state"
# The app label of the GPU Operator's device plugin pods (one per GPU node where it runs).
DEVICE_PLUGIN_APP = "nvidia-device-plugin-daemonset"
# Every GPU resource the device plugin advertises (whole GPUs and MIG profiles).
GPU_RESOURCE_PREFIX = "nvidia.com/"
