"""Running compiled kernels: module loading, argument packing and launches over the driver API."""
