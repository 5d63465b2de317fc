"""`train_rl.compiler_options`: XLA options for every program a run compiles.

XLA's `xla_dump_to` makes the options observable: a program compiled with
it leaves its HLO in that folder, one compiled without it does not.
"""

import os

import gin
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from trax_rl import compile_options, configurables


@pytest.fixture(autouse=True)
def compile_everything():
  """No persistent cache: a program served from it would not be dumped."""
  before = jax.config.jax_enable_compilation_cache
  jax.config.update('jax_enable_compilation_cache', False)
  yield
  jax.config.update('jax_enable_compilation_cache', before)
  gin.clear_config()


def _dumped(folder) -> set[str]:
  """Names of the programs compiled into `folder` ('jit_tripled', ...)."""
  if not os.path.isdir(folder):
    return set()
  return {name.split('.')[1] for name in os.listdir(folder) if '.' in name}


def tripled(x):
  return 3 * x


def quadrupled(x):
  return 4 * x


def test_programs_jitted_inside_get_the_options_and_no_others(tmp_path):
  dump = str(tmp_path / 'dump')
  with compile_options.applied({'cpu': {'xla_dump_to': dump}}) as mine:
    assert mine == {'xla_dump_to': dump}
    assert compile_options.current() == mine
    inside = compile_options.jit(tripled)
  outside = compile_options.jit(quadrupled)
  assert compile_options.current() == {}
  np.testing.assert_array_equal(inside(jnp.ones(2)), [3.0, 3.0])
  np.testing.assert_array_equal(outside(jnp.ones(2)), [4.0, 4.0])
  assert 'jit_tripled' in _dumped(dump)
  assert 'jit_quadrupled' not in _dumped(dump)


def test_a_function_called_inside_a_transformation_still_works(tmp_path):
  # JAX refuses compile options on a nested jit; the outer program's apply.
  with compile_options.applied({'cpu': {'xla_dump_to': str(tmp_path)}}):
    inner = compile_options.jit(tripled)
    outer = compile_options.jit(lambda x: inner(x) + 1)
  x = jnp.arange(3.0)
  np.testing.assert_array_equal(outer(x), 3 * x + 1)
  np.testing.assert_array_equal(jax.vmap(inner)(x), 3 * x)
  assert float(jax.grad(lambda v: inner(v).sum())(1.0)) == 3.0
  assert inner.lower(x).compile()(x).shape == (3,)


def test_other_platforms_options_are_checked_but_not_applied(tmp_path):
  dump = str(tmp_path / 'dump')
  with compile_options.applied({'gpu': {'xla_dump_to': dump}}) as mine:
    assert mine == {}
    compile_options.jit(tripled)(jnp.ones(2))
  assert 'jit_tripled' not in _dumped(dump)  # Only the check's program.
  with pytest.raises(ValueError, match=r"compiler_options\['tpu'\].*xla_foo"):
    compile_options.check({'tpu': {'xla_foo': 1}})


@pytest.mark.parametrize(
  'options, culprit',
  [
    ({'xla_backend_optimization_level': 1}, 'must map a platform'),
    ({'quantum': {}}, "got {'quantum'"),
    ([('cpu', {})], 'must map a platform'),
    ({'cpu': {'xla_backend_optimisation_level': 1}}, 'optimisation'),
    ({'cpu': {'xla_backend_optimization_level': 'x'}}, "'x' is not a valid"),
  ],
)
def test_bad_options_are_one_line_errors(options, culprit):
  with pytest.raises(ValueError) as error:
    compile_options.check(options)
  message = str(error.value)
  assert culprit in message
  assert '\n' not in message


def test_the_previous_options_come_back_after_an_error(tmp_path):
  outer = {'cpu': {'xla_dump_to': str(tmp_path / 'a')}}
  with compile_options.applied(outer):
    with pytest.raises(RuntimeError):
      inner = {'cpu': {'xla_dump_to': str(tmp_path / 'b')}}
      with compile_options.applied(inner):
        raise RuntimeError('boom')
    assert compile_options.current() == outer['cpu']
  assert compile_options.current() == {}


_SMALL_PPO = [
  'train_rl.n_epochs=1',
  'train_rl.epochs_per_call=1',
  'RLTask.n_envs=2',
  'PPO.n_interactions_per_epoch=16',
  'PPO.policy_train_steps_per_epoch=1',
  'PPO.value_train_steps_per_epoch=1',
  'PPO.n_eval_episodes=0',
]


@pytest.mark.parametrize(
  'config',
  ['gin/gymnax/ppo_cartpole.gin', 'gin/ppo_cartpole.gin'],
  ids=['device', 'gymnasium'],
)
def test_a_run_compiles_its_programs_with_the_options(tmp_path, config):
  dump = str(tmp_path / 'dump')
  configurables.parse(
    [config],
    [
      *_SMALL_PPO,
      f"train_rl.compiler_options={{'cpu': {{'xla_dump_to': '{dump}'}}}}",
    ],
  )
  agent = configurables.train_rl(output_dir=str(tmp_path / 'run'))
  assert agent.current_epoch == 1
  programs = _dumped(dump)
  # The network's init, the policy and its update; on the device path
  # the epoch program (one epoch per call) holds the last two.
  assert 'jit__init_batch' in programs, programs
  if agent.task.jax_env is not None:
    assert 'jit_call' in programs, programs
  else:
    assert len(programs - {'jit_negative', 'jit__init_batch'}) >= 2, programs
  assert compile_options.current() == {}


def test_a_bad_option_stops_the_run_before_it_writes(tmp_path):
  run = tmp_path / 'run'
  run.mkdir()
  (run / 'keep.txt').write_text('earlier output')
  configurables.parse(
    ['gin/gymnax/ppo_cartpole.gin'],
    [*_SMALL_PPO, "train_rl.compiler_options={'cpu': {'xla_nope': 1}}"],
  )
  with pytest.raises(ValueError, match="compiler_options\\['cpu'\\].*xla_nope"):
    configurables.train_rl(output_dir=str(run))
  assert sorted(os.listdir(run)) == ['keep.txt']
