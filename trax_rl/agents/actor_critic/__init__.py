"""Actor-critic agents (Trax's A2C, PPO, AWR, SamplingAWR and *Joint).

An algorithm is one objective (`trax_rl.losses.actor_critic`: A2C, PPO,
AWR, Sampling AWR); separate or joint networks are a choice of network
layout, not a second class tree. Modules:

- `algorithms`: the gin names (`PPO`, `PPOJoint`, ...): an objective, a
  layout class and defaults, nothing else.
- `agent`: `ActorCritic`, the one agent: acting, observation
  normalization, packing trajectories, the jitted epoch, checkpoints.
- `knobs`: the old knob names (`ALIASES`, resolved there only) and gin
  values turned into what the objectives take.
- `device_path`: the device path's hooks: the same jitted epoch, fed from
  the rollout.
- `layout`: the `Context` a layout is built from.
- `separate`, `joint`: the layouts. Each builds its networks, optimizers
  and `Trainer`s and gives the pure epoch function below.
- `critic`: V, or Q aggregated over sampled actions (separate layout).
- `data`: trajectories packed into `EpochData`, minibatch indices, the
  advantages of packed steps.

The epoch contract (shared by the gymnasium path and the device path):

    layout.train_on_batch(states, data, idx, key) -> (states, metrics)

- `states`: {trainer name: TrainState} ('policy' and 'value', or 'joint').
- `data`: `data.EpochData`, every field `[N, ...]`: the steps of many
  trajectories end to end, observations already normalized. `terminal`
  marks a termination, `boundary` any other end of a trajectory (time
  limit, epoch cut: bootstrapped from V(next_observation)), `mask` real
  steps (0 on padding). A time-major or batch-major rollout `[B, T, ...]`
  is this with N = B * T, rows flattened and `boundary` set on each row's
  last step where it did not terminate.
- `idx`: the layout's `minibatch_indices(rng, n_valid)`: integer arrays
  of step indices (`[E, K, B]` for value rounds, `[K, B]` for policy
  updates); the device path may draw them with `jax.random.permutation`.
- `key`: a PRNG key (Q-value action samples; the joint layout ignores it).

Inside, values, advantages and targets are computed in jnp and all
minibatch updates run in `lax.scan`s of the pure update the `Trainer`s
use, so the function is pure and jittable: the agent calls it jitted from
host-packed data (`ActorCritic.train_epoch`), and a device data path can
call the same function inside its own jitted epoch.
"""
