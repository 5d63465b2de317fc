"""trax_rl.supervised."""
