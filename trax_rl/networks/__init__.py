"""trax_rl.networks."""
