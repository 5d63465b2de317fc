"""Replay: `DeviceTable`, a Reverb-like table of jnp arrays (every source)."""
