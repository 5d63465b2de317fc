"""Unused gin bindings (--strict) and changed configs on resume."""

import pathlib

from trax_rl import cli
from trax_rl.testing import cli_args

ROOT = pathlib.Path(__file__).resolve().parents[1]
# Bindings of configurables nobody calls, one in a scope that only an
# unused binding opens: unused, found after epoch 1.
TYPOS = (
  'multifactor.constant = 1e30',
  'Value.body = @plain/MLP',
  'plain/constant_lr.value = 0.1',
)


def _train(capsys, output_dir, n_epochs, *bindings, flags=()):
  args = cli_args.tiny_pg_train(
    ROOT / 'gin' / 'pg_cartpole.gin',
    output_dir,
    n_epochs,
    *bindings,
    flags=flags,
  )
  code = cli.main(args)
  return code, capsys.readouterr().err.strip().splitlines()


def test_unused_bindings_are_one_warning_line(capsys, tmp_path):
  # The gin file's unscoped constant_lr.value is overridden in the one
  # (scoped) call: unused too.
  code, err = _train(
    capsys,
    tmp_path,
    2,
    *TYPOS,
    'PolicyGradient.lr_schedule = @policy/constant_lr',
    'policy/constant_lr.value = 0.01',
    'UNUSED_MACRO = 3',
  )
  assert code == 0
  assert err == [
    'trax-rl: warning: gin bindings never used: UNUSED_MACRO, '
    'Value.body, constant_lr.value, multifactor.constant, '
    'plain/constant_lr.value'
  ]
  code, err = _train(capsys, tmp_path / 'clean', 1)
  assert code == 0 and err == []


def test_strict_makes_unused_bindings_an_error(capsys, tmp_path):
  code, err = _train(capsys, tmp_path, 2, *TYPOS, flags=['--strict'])
  assert code == 2
  assert err == [
    'trax-rl: error: gin bindings never used: Value.body, '
    'multifactor.constant, plain/constant_lr.value (--strict)'
  ]


def test_a_scope_nobody_opens_stops_before_training(capsys, tmp_path):
  # 'polcy' appears in no @polcy/... reference: it can never be read.
  code, err = _train(
    capsys,
    tmp_path,
    1,
    'PolicyGradient.lr_schedule = @policy/constant_lr',
    'polcy/constant_lr.value = 0.1',
  )
  assert code == 2
  assert err == [
    'trax-rl: error: gin binding polcy/constant_lr.value is never used: no '
    "@polcy/... reference opens scope 'polcy'; did you mean 'policy'?"
  ]
  assert not (tmp_path / 'checkpoint.pkl').exists()


def test_changed_config_is_refused_unless_allowed(capsys, tmp_path):
  assert _train(capsys, tmp_path, 1) == (0, [])
  ckpt = (tmp_path / 'checkpoint.pkl').read_bytes()
  config = (tmp_path / 'config.gin').read_text()
  code, err = _train(
    capsys, tmp_path, 2, 'constant_lr.value = 0.01', 'RLTask.gamma = 0.9'
  )
  assert code == 2 and len(err) == 1
  assert err[0].startswith(
    f'trax-rl: error: the config differs from {tmp_path}/config.gin in '
    'RLTask.gamma: 0.99 -> 0.9; constant_lr.value: 0.005 -> 0.01: rerun '
    'with --allow_config_change'
  )
  assert (tmp_path / 'checkpoint.pkl').read_bytes() == ckpt
  assert (tmp_path / 'config.gin').read_text() == config
  # Only n_epochs changed: the same job, continued.
  assert _train(capsys, tmp_path, 2) == (0, [])
  code, err = _train(
    capsys,
    tmp_path,
    3,
    'constant_lr.value = 0.01',
    flags=['--allow_config_change'],
  )
  assert code == 0
  assert err == [
    'trax-rl: warning: resuming with changed bindings: '
    'constant_lr.value: 0.005 -> 0.01'
  ]
  assert 'constant_lr.value = 0.01' in (tmp_path / 'config.gin').read_text()
  assert _train(capsys, tmp_path, 4, 'constant_lr.value = 0.01') == (0, [])
