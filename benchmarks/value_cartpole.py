"""Value agents on CartPole-v1: greedy eval return within an env-step budget.

  python benchmarks/value_cartpole.py --config gin/dqn_cartpole.gin \
      --seeds 0 1 2 --steps 100000

Evaluates 10 greedy episodes every 10k env steps; target 475. See
`seed_sweep.py` for the JSON lines and every flag.
"""

import seed_sweep

if __name__ == '__main__':
  seed_sweep.main(__doc__, steps=100_000, eval_every=10_000, target=475.0)
