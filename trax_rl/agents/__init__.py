"""trax_rl.agents."""
