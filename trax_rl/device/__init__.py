"""The device data path: compiled collection and epochs on JAX envs."""
