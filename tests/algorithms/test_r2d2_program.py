"""R2D2's program: segments as Acme's sequence adder cuts them, by hand."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from trax_rl import types
from trax_rl.algorithms import r2d2
from trax_rl.device import rollout

GAMMA = 0.9


def _reference(env_steps, length, period):
  """Acme's sequence adder, transcribed for one env's steps in order.

  `env_steps`: dicts with obs, action, reward, terminated, truncated,
  next_obs, core. Entries of an episode are its steps, then (where it
  ended) its final observation with mask 0. A segment of `length` entries
  starts at every multiple of `period` and is cut once its last entry is
  in; when the episode ends, the first start no full segment took gets a
  zero-padded segment if it holds a real step. Returns tuples of numbers.
  """
  out, entries = [], []

  def emit(start, count):
    rows = entries[start : start + count]
    pad = length - count
    obs = [e['obs'] for e in rows] + [0.0] * pad
    cols = lambda k: [e[k] for e in rows] + [0.0] * pad  # noqa: E731
    out.append(
      tuple(
        np.round(
          np.concatenate(
            [
              np.ravel(obs),
              cols('action'),
              cols('reward'),
              cols('discount'),
              cols('mask'),
              np.ravel(rows[0]['core']),
            ]
          ).astype(np.float64),
          5,
        )
      )
    )

  for step in env_steps:
    entries.append(
      dict(
        obs=step['obs'],
        action=step['action'],
        reward=step['reward'],
        discount=GAMMA * (1.0 - step['terminated']),
        mask=1.0,
        core=step['core'],
      )
    )
    p = len(entries) - 1
    if p - length + 1 >= 0 and (p - length + 1) % period == 0:
      emit(p - length + 1, length)
    if step['terminated'] or step['truncated']:
      entries.append(
        dict(
          obs=step['next_obs'],
          action=0.0,
          reward=0.0,
          discount=0.0,
          mask=0.0,
          core=np.zeros_like(step['core']),
        )
      )
      last = p + 1
      if last - length + 1 >= 0 and (last - length + 1) % period == 0:
        emit(last - length + 1, length)
      start = ((last - length + 1) // period + 1) * period
      start = start if last >= length - 1 else 0
      if start < last:
        emit(start, last - start + 1)
      entries = []
  return out


def _random_env_steps(rng, n):
  steps, obs = [], float(rng.integers(1000))
  for _ in range(n):
    end = rng.random()
    nxt = float(rng.integers(1000))
    steps.append(
      dict(
        obs=obs,
        action=float(rng.integers(3)),
        reward=float(np.round(rng.normal(), 3)),
        terminated=end < 0.12,
        truncated=0.12 <= end < 0.2,
        next_obs=nxt,
        core=np.round(rng.normal(size=2), 3).astype(np.float32),
      )
    )
    obs = float(rng.integers(1000)) if end < 0.2 else nxt
  return steps


def _rollout(chunks, n_steps):
  """Per-env lists of steps (a prefix each) as one padded `[T, N]` Rollout."""
  n = len(chunks)

  def field(name, shape=()):
    x = np.zeros((n_steps, n) + shape, np.float32)
    for i, chunk in enumerate(chunks):
      for t, s in enumerate(chunk):
        x[t, i] = s[name]
    return x

  valid = np.zeros((n_steps, n), bool)
  for i, chunk in enumerate(chunks):
    valid[: len(chunk), i] = True
  return rollout.Rollout(
    observation=field('obs', (1,)),
    action=field('action').astype(np.int32),
    reward=field('reward'),
    terminated=field('terminated').astype(bool) & valid,
    truncated=field('truncated').astype(bool) & valid,
    next_observation=field('next_obs', (1,)),
    agent_info={'core': {'h': field('core', (2,))}},
    episode_return=np.zeros((n_steps, n), np.float32),
    valid=valid,
  )


def _canonical(segments):
  rows = []
  for s in segments:
    parts = [
      np.asarray(x, np.float64).ravel()
      for x in (s.observation, s.action, s.reward, s.discount, s.mask)
    ]
    parts.append(np.asarray(s.core_state['h'], np.float64).ravel())
    rows.append(tuple(np.round(np.concatenate(parts), 5)))
  return sorted(rows)


def _cut(rollouts, length, period, n_steps):
  """cut_segments and read_segments over rollouts of per-env step lists."""
  n_envs = len(rollouts[0])
  size = r2d2.ring_length(length, n_steps)
  ring = types.Segment(
    observation=jnp.zeros((size, n_envs, 1)),
    action=jnp.zeros((size, n_envs), jnp.int32),
    reward=jnp.zeros((size, n_envs)),
    discount=jnp.zeros((size, n_envs)),
    mask=jnp.zeros((size, n_envs)),
    core_state={'h': jnp.zeros((size, n_envs, 2))},
  )
  zeros = jnp.zeros(n_envs, jnp.int32)
  history = r2d2.History(ring, zeros, zeros)
  cut = jax.jit(r2d2.cut_segments, static_argnums=(3, 4, 5))
  read = jax.jit(r2d2.read_segments, static_argnums=(3, 4))
  got = []
  for chunks in rollouts:
    steps = _rollout(chunks, n_steps)
    history, cuts = cut(
      history, steps, steps.agent_info['core'], length, period, GAMMA
    )
    rows = np.flatnonzero(np.asarray(cuts.valid))
    segments = read(history.ring, cuts, jnp.asarray(rows), n_envs, length)
    got += [
      jax.tree.map(lambda x, j=j: np.asarray(x)[j], segments)
      for j in range(len(rows))
    ]
  return got


@pytest.mark.parametrize(
  'burn_in, trace, period', [(1, 2, 2), (0, 3, 4), (2, 3, 1), (1, 4, 3)]
)
def test_segments_are_the_sequence_adders(burn_in, trace, period):
  # Three envs, each a stream of random steps (episodes end at random),
  # fed as three rollouts of 9 steps whose valid prefixes differ by env:
  # episodes and segments span rollouts, padding adds nothing.
  rng = np.random.default_rng(burn_in * 100 + trace * 10 + period)
  length = burn_in + trace + 1
  streams = [_random_env_steps(rng, 21) for _ in range(3)]
  sizes = [(9, 9, 3), (4, 9, 8), (9, 3, 9)]  # Per env; 21 steps each.
  rollouts, offsets = [], [0, 0, 0]
  for part in range(3):
    chunks = []
    for i, stream in enumerate(streams):
      n = sizes[i][part]
      chunks.append(stream[offsets[i] : offsets[i] + n])
      offsets[i] += n
    rollouts.append(chunks)
  got = _cut(rollouts, length, period, 9)
  expected = sorted(sum((_reference(s, length, period) for s in streams), []))
  assert len(expected) > 5
  assert _canonical(got) == expected


def test_a_short_terminated_episode_is_one_padded_segment():
  # L = 4: two steps, terminated: [o0, o1, final o2, 0] with mask
  # [1, 1, 0, 0] and discounts [.9, 0, 0, 0], the core before step 0.
  steps = [
    dict(obs=5.0, action=1.0, reward=1.0, terminated=False, truncated=False,
         next_obs=6.0, core=np.array([1.0, 2.0], np.float32)),
    dict(obs=6.0, action=0.0, reward=2.0, terminated=True, truncated=False,
         next_obs=7.0, core=np.array([3.0, 4.0], np.float32)),
  ]  # fmt: skip
  (segment,) = _cut([[steps]], 4, 2, 4)
  np.testing.assert_allclose(segment.observation[:, 0], [5, 6, 7, 0])
  np.testing.assert_allclose(segment.action, [1, 0, 0, 0])
  np.testing.assert_allclose(segment.reward, [1, 2, 0, 0])
  np.testing.assert_allclose(segment.discount, [0.9, 0, 0, 0], rtol=1e-6)
  np.testing.assert_allclose(segment.mask, [1, 1, 0, 0])
  np.testing.assert_allclose(segment.core_state['h'], [1, 2])
