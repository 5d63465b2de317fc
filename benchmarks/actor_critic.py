"""Learning and speed of the actor-critic gin configs; JSON lines.

  python benchmarks/actor_critic.py --config gin/ppo_cartpole.gin \
      --seeds 0 1 2 --steps 100000 [--target 475] [--eval_every 10000]

By default evaluates (10 greedy episodes) only at the end of the budget, so
the wall time is training alone. See `seed_sweep.py` for every flag.
"""

import seed_sweep

if __name__ == '__main__':
  seed_sweep.main(__doc__, steps=100_000, eval_every=0, target=475.0)
