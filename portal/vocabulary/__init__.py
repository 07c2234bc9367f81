"""Pure Kubernetes vocabulary: quantities, names, labels, numbers, errors."""
