"""R2D2 against a feed-forward DQN on masked-velocity CartPole.

  python benchmarks/r2d2_masked.py --seeds 0 1 2 --steps 300000

CartPole-v1 with its velocities zeroed (`envs.masked_cartpole`) needs
memory: R2D2's LSTM can infer the velocities, a feed-forward Q network
cannot. Both configs are trained per seed; 16 greedy episodes every 10k env
steps; target 400. See `seed_sweep.py` for the JSON lines and every flag.
"""

import seed_sweep

if __name__ == '__main__':
  seed_sweep.main(
    __doc__,
    configs=('gin/r2d2_cartpole_masked.gin', 'gin/dqn_cartpole_masked.gin'),
    steps=300_000,
    eval_every=10_000,
    eval_episodes=16,
    target=400.0,
  )
