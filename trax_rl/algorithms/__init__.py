"""One program per algorithm family: pure functions over a learner pytree."""
