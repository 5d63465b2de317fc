"""The runner: the one training loop, for every source and seed count."""
