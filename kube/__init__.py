"""The one gateway to Kubernetes. Only this package imports the ``kubernetes`` client.

It imports no portal app: callers pass configuration in, and get plain dicts and typed
errors (:class:`RetryableKubeError`, :class:`PermanentKubeError`) back.
"""

from kube.errors import (
    ApplyConflict,
    EvictionBlocked,
    KubeError,
    NotFound,
    PermanentKubeError,
    RetryableKubeError,
)
from kube.gateway import Gateway, ObjectRef, connect

__all__ = [
    "ApplyConflict",
    "EvictionBlocked",
    "Gateway",
    "KubeError",
    "NotFound",
    "ObjectRef",
    "PermanentKubeError",
    "RetryableKubeError",
    "connect",
]
