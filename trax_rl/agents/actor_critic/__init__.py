"""Actor-critic agents (Trax's A2C, PPO, AWR, SamplingAWR and *Joint).

An algorithm is one objective (`trax_rl.losses.actor_critic`: A2C, PPO,
AWR, Sampling AWR); separate or joint networks are a choice of network
layout, not a second class tree. Modules:

- `algorithms`: the gin names (`PPO`, `PPOJoint`, ...): an objective, a
  layout class and defaults, nothing else.
- `agent`: `ActorCritic`, the one agent: its knobs configure the
  program (`algorithms.actor_critic`: acting, observation normalization,
  packing, minibatches), the same on every source.
- `knobs`: the old knob names (`ALIASES`, resolved there only) and gin
  values turned into what the objectives take.
- `layout`: the `Context` a layout is built from.
- `separate`, `joint`: the layouts. Each builds its networks and
  optimizers and gives the pure epoch function below.
- `critic`: V, or Q aggregated over sampled actions (separate layout).
- `data`: `EpochData` (packed steps), the advantages of packed steps and
  their minibatches.

The epoch contract (what the program calls):

    layout.train_on_batch(states, data, idx, key) -> (states, metrics)

- `states`: {trainer name: TrainState} ('policy' and 'value', or 'joint').
- `data`: `data.EpochData`, every field `[N, ...]`: the steps of many
  trajectories end to end, observations already normalized. `terminal`
  marks a termination, `boundary` any other end of a trajectory (time
  limit, epoch cut: bootstrapped from V(next_observation)), `mask` real
  steps (0 on padding). A time-major or batch-major rollout `[B, T, ...]`
  is this with N = B * T, rows flattened and `boundary` set on each row's
  last step where it did not terminate.
- `idx`: integer arrays of step indices of the layout's
  `minibatch_shapes()` (`[E, K, B]`: rounds of minibatches), drawn by the
  program (`algorithms.actor_critic`) as passes over the shuffled steps.
- `key`: a PRNG key (Q-value action samples; the joint layout ignores it).

Inside, values, advantages and targets are computed in jnp and all
minibatch updates run in `lax.scan`s of the pure update, so the function is
pure and jittable: the program calls it inside its `learn`.
"""
