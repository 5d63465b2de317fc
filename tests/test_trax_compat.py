"""Trax's own RL gin files (tests/data/trax_configs), run and converted."""

import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from trax_rl import cli, configurables, trax_compat, trax_optimizers

DATA = pathlib.Path(__file__).resolve().parent / 'data' / 'trax_configs'
# Each runnable file, with bindings that make its one epoch short.
RUNNABLE = {
  'dqn_cartpole_regression.gin': [
    'DQN.n_interactions_per_epoch=40',
    'DQN.value_train_steps_per_epoch=2',
  ],
  'light_awr_joint_cartpole.gin': [
    'RLTask.initial_trajectories=2',
    'AWRJoint.n_trajectories_per_epoch=2',
    'AWRJoint.train_steps_per_epoch=2',
  ],
  'light_cartpole.gin': [
    'RLTask.initial_trajectories=2',
    'PolicyGradient.n_trajectories_per_epoch=2',
  ],
  'light_joint_cartpole.gin': [
    'PPOJoint.n_trajectories_per_epoch=2',
    'PPOJoint.train_steps_per_epoch=2',
  ],
  'light_ppo_cartpole_regression_test.gin': [
    'PPOJoint.n_trajectories_per_epoch=2',
    'PPOJoint.train_steps_per_epoch=2',
  ],
  'light_ppo_lunar_lander_regression_test.gin': [
    'RLTask.max_steps=50',
    'PPOJoint.n_trajectories_per_epoch=1',
    'PPOJoint.train_steps_per_epoch=2',
  ],
}
# Files whose agent trax_rl has, and the binding each stops at.
UNSUPPORTED = {
  'light_atari.gin': 'AtariCnnBody.kernel_initializer',
  'light_copy.gin': 'model = @trax.models.TransformerDecoder',
  'light_joint_atari.gin': 'PolicyAndValue.body = @trax.models.AtariCnnBody',
  'light_lunarlander.gin': 'model = @trax.models.TransformerDecoder',
  'light_mujoco.gin': 'Value.inject_actions_dim',
  'light_mujoco_regression_test.gin': 'Value.inject_actions_dim',
  'light_ppo_atari.gin': 'Policy.body = @trax.models.AtariCnnBody',
  'light_ppo_boxing_regression_test.gin': 'PolicyAndValue.body',
  'light_ppo_half_cheetah_regression_test.gin': 'Policy.head_init_range',
  'light_ppo_joint_atari.gin': 'PolicyAndValue.body',
  'light_ppo_pong_regression_test.gin': 'PolicyAndValue.body',
}


def _train(capsys, config_file, output_dir, bindings):
  args = ['train', '--config_file', str(config_file)]
  args += ['--output_dir', str(output_dir), '--no_progress']
  for b in bindings:
    args += ['--config', b]
  code = cli.main(args)
  return code, capsys.readouterr()


def _records(output_dir):
  lines = (pathlib.Path(output_dir) / 'metrics.jsonl').read_text().splitlines()
  timing = ('_s', 'per_s', 'time')
  return [
    {k: v for k, v in json.loads(line).items() if not k.endswith(timing)}
    for line in lines
  ]


def _returns(output_dir):
  lines = (pathlib.Path(output_dir) / 'metrics.jsonl').read_text().splitlines()
  return [json.loads(line)['avg_return'] for line in lines]


def test_every_config_file_is_covered():
  files = {p.name for p in DATA.glob('*.gin')}
  not_rl = {'transformer_srl_sine.gin'}  # Supervised, no agent.
  assert files == set(RUNNABLE) | set(UNSUPPORTED) | not_rl
  for p in DATA.glob('*.gin'):
    head = p.read_text()[:600]
    assert 'github.com/google/trax/blob/v1.4.1/trax/rl/configs/' in head
    assert 'Licensed under the Apache License, Version 2.0' in head


@pytest.mark.parametrize('name', sorted(RUNNABLE))
def test_trax_config_trains_one_short_epoch(capsys, tmp_path, name):
  code, out = _train(
    capsys, DATA / name, tmp_path, ['train_rl.n_epochs=1', *RUNNABLE[name]]
  )
  assert code == 0, out.err
  assert len(_returns(tmp_path)) == 1
  assert 'trax-rl: error' not in out.err


@pytest.mark.parametrize('name', sorted(UNSUPPORTED))
def test_unsupported_binding_stops_with_one_line(capsys, tmp_path, name):
  code, out = _train(capsys, DATA / name, tmp_path, [])
  assert code == 2
  errors = [x for x in out.err.splitlines() if x.startswith('trax-rl: error')]
  assert len(errors) == 1, out.err
  assert UNSUPPORTED[name] in errors[0]
  assert 'has no trax_rl equivalent' in errors[0]


def test_no_agent_and_light_rl_false_are_errors(capsys, tmp_path):
  code, out = _train(capsys, DATA / 'transformer_srl_sine.gin', tmp_path, [])
  assert code == 2 and 'names no agent' in out.err
  text = (DATA / 'light_joint_cartpole.gin').read_text()
  bad = tmp_path / 'bad.gin'
  bad.write_text(text.replace('light_rl = True', 'light_rl = False'))
  code, out = _train(capsys, bad, tmp_path / 'out', [])
  assert code == 2
  assert out.err.strip().endswith(
    'only light_rl trainers are supported; set it to True'
  )


def test_old_env_id_maps_with_notice():
  assert trax_compat.current_env_id('LunarLander-v2') == 'LunarLander-v3'
  assert trax_compat.current_env_id('CartPole-v0') == 'CartPole-v0'
  text = (DATA / 'light_ppo_lunar_lander_regression_test.gin').read_text()
  conversion = trax_compat.convert(text, configurables.accepts)
  assert "RLTask.env = 'LunarLander-v3'" in conversion.text
  assert (
    'env LunarLander-v2 is gone from gymnasium: using LunarLander-v3'
    in conversion.notices
  )


def test_conversion_maps_names_knobs_and_trax_defaults():
  text = (DATA / 'light_joint_cartpole.gin').read_text()
  native = trax_compat.convert(text, configurables.accepts).text
  code = [x for x in native.splitlines() if not x.startswith('#')]
  assert not [x for x in code if 'import' in x or 'trax' in x]
  assert 'train_rl.agent_class = @PPOJoint' in native
  assert 'PPOJoint.optimizer = @Adam' in native
  assert 'Adam.clip_grad_norm = 0.5' in native
  assert 'PPOJoint.advantage_estimator = @monte_carlo' in native
  # A2CJoint and AWRJoint are not used by this run: kept as comments.
  assert '# A2CJoint.batch_size = 256' in native
  assert '\nA2CJoint.' not in native


def test_dqn_file_builds_its_network_with_trax_initializers():
  name = 'dqn_cartpole_regression.gin'
  native = trax_compat.convert(
    (DATA / name).read_text(), configurables.accepts
  ).text
  assert "\nMLP.dense_init = 'glorot'" in native
  assert "\nQuality.dense_init = 'glorot'" in native
  configurables.parse(
    [str(DATA / name)], ['train_rl.n_epochs=1', *RUNNABLE[name]]
  )
  agent = configurables.train_rl(output_dir=None)
  # The target took the params before the first update: the initial ones.
  initial = agent.learner.train.target_params['params']
  layers = [initial['MLP_0']['Dense_0'], initial['Dense_0']]  # Body, head.
  for layer in layers:
    assert 0 < np.abs(np.asarray(layer['bias'])).max() < 1e-5


def test_other_imports_kept_includes_refused_comments_ignored():
  text = (DATA / 'light_joint_cartpole.gin').read_text()
  native = trax_compat.convert(
    'import gymnasium.wrappers\n' + text, configurables.accepts
  ).text
  assert '\nimport gymnasium.wrappers\n' in native
  with pytest.raises(ValueError, match='convert the included file'):
    trax_compat.convert("include 'other.gin'\n" + text, configurables.accepts)
  assert not trax_compat.is_trax_config('# light_rl_trainer, @trax.rl\n')


def test_metrics_only_knob_is_noticed_not_silent():
  text = (DATA / 'dqn_cartpole_regression.gin').read_text()
  conversion = trax_compat.convert(text, configurables.accepts)
  if configurables.accepts('DQN', 'value_evals_per_epoch'):
    assert 'DQN.value_evals_per_epoch = 1' in conversion.text
  else:
    assert any('DQN.value_evals_per_epoch' in n for n in conversion.notices)


def test_installed_trax_is_never_shadowed(monkeypatch, tmp_path):
  monkeypatch.setattr(trax_compat, 'trax_installed', lambda: True)
  path = DATA / 'light_ppo_cartpole_regression_test.gin'
  assert configurables.translated_trax_config(str(path)) is None
  with pytest.raises(ImportError, match="No module named 'trax'"):
    configurables.parse([str(path)])


def test_convert_output_trains_to_the_same_returns(capsys, tmp_path):
  trax_file = DATA / 'light_ppo_cartpole_regression_test.gin'
  native = tmp_path / 'native.gin'
  assert cli.main(['convert', str(trax_file), '--out', str(native)]) == 0
  code = [x for x in native.read_text().splitlines() if not x.startswith('#')]
  assert code and not [x for x in code if 'trax' in x]
  short = [
    'train_rl.n_epochs=2',
    'PPOJoint.n_trajectories_per_epoch=3',
    'PPOJoint.train_steps_per_epoch=2',
    'PPOJoint.seed=7',
  ]
  assert _train(capsys, trax_file, tmp_path / 'a', short)[0] == 0
  assert _train(capsys, native, tmp_path / 'b', short)[0] == 0
  a, b = _returns(tmp_path / 'a'), _returns(tmp_path / 'b')
  assert len(a) == 2 and a == b
  # The losses too: same network, optimizer and data.
  ra, rb = _records(tmp_path / 'a'), _records(tmp_path / 'b')
  assert any('loss' in k for k in ra[-1])
  assert ra == rb


def test_convert_refuses_a_native_file(capsys):
  root = DATA.parents[2]
  code = cli.main(['convert', str(root / 'gin' / 'ppo_joint_cartpole.gin')])
  assert code == 2
  assert 'is not a Trax config' in capsys.readouterr().err


def _steps(opt, params, grads):
  state = opt.init(params)
  for g in grads:
    updates, state = opt.update(g, state, params)
    params = optax.apply_updates(params, updates)
  return params


@pytest.mark.parametrize('jit', [False, True])
def test_trax_adam_matches_trax_update_rule(jit):
  # Trax: m = 0.1 g, v = 0.001 g^2 after one step; mhat = g, vhat = g^2;
  # w <- (1 - wd) w - lr * g / (|g| + eps). w = 2, g = 4, lr = 0.1, wd = 0.01:
  # 1.98 - 0.1 * 4 / (4 + 1e-5).
  opt = trax_optimizers.trax_adam(learning_rate=0.1, weight_decay_rate=0.01)
  run = jax.jit(_steps, static_argnums=0) if jit else _steps
  w = run(opt, jnp.array([2.0]), [jnp.array([4.0])])
  np.testing.assert_allclose(w, [1.98 - 0.4 / (4 + 1e-5)], rtol=1e-6)


def test_trax_adam_clips_gradient_norm_and_has_trax_defaults():
  # |g| = 5 clipped to 0.5: g = (0.3, 0.4); Adam's first step moves each
  # weight by lr * g / (|g| + eps), i.e. by about lr, whatever the scale.
  opt = trax_optimizers.trax_adam(learning_rate=0.1, clip_grad_norm=0.5)
  opt.init(jnp.zeros(2))
  clipped = optax.clip_by_global_norm(0.5).update(jnp.array([3.0, 4.0]), ())[0]
  np.testing.assert_allclose(clipped, [0.3, 0.4], rtol=1e-6)
  w = _steps(opt, jnp.ones(2), [jnp.array([3.0, 4.0])])
  # Default weight_decay_rate 1e-5 and eps 1e-5, as Trax's Adam.
  expected = (1 - 1e-5) - 0.1 * np.array([0.3, 0.4]) / (
    np.array([0.3, 0.4]) + 1e-5
  )
  np.testing.assert_allclose(w, expected, rtol=1e-6)


def test_trax_rmsprop_and_momentum_match_trax_update_rules():
  # RMSProp: avg = 0.9 * 1 + 0.1 * 9 = 1.8; w = 1 - 0.1 * 3 / sqrt(1.8).
  w = _steps(trax_optimizers.trax_rmsprop(0.1), jnp.ones(1), [jnp.full(1, 3.0)])
  np.testing.assert_allclose(w, [1 - 0.3 / np.sqrt(1.8)], rtol=1e-6)
  # Nesterov momentum: v = g = 2; step = 0.9 * 2 + 2 = 3.8;
  # w = (1 - 1e-5) * 1 - 0.1 * 3.8.
  w = _steps(
    trax_optimizers.trax_momentum(0.1), jnp.ones(1), [jnp.full(1, 2.0)]
  )
  np.testing.assert_allclose(w, [(1 - 1e-5) - 0.38], rtol=1e-6)
