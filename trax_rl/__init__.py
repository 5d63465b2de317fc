"""trax_rl: Trax RL and the Acme JAX value learners on today's stack."""
