"""trax_rl.testing."""
