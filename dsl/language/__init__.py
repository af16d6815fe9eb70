"""The language surface: scalar and tensor types, intrinsics, the @kernel and @jit decorators."""
