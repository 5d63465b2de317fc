"""Command lines for short `trax-rl train` runs in tests."""

from collections.abc import Sequence

# Shrinks gin/pg_cartpole.gin so that a few epochs train in seconds.
TINY_PG_BINDINGS = (
  'RLTask.n_envs = 2',
  'MLP.layer_widths = (8,)',
  'PolicyGradient.n_trajectories_per_epoch = 2',
  'PolicyGradient.batch_size = 16',
  'PolicyGradient.n_eval_episodes = 0',
)


# PolicyGradient on gymnax's CartPole-v1 in 64-step epochs: a device-path
# run of a few epochs in seconds.
TINY_GYMNAX_PG = """
RLTask.env = 'gymnax:CartPole-v1'
RLTask.n_envs = 4
RLTask.initial_trajectories = 0
MLP.layer_widths = (16,)
Policy.body = @MLP
PolicyGradient.model_fn = @Policy
PolicyGradient.batch_size = 64
PolicyGradient.n_interactions_per_epoch = 64
train_rl.agent_class = @PolicyGradient
"""


def tiny_pg_train(
  config_file: str,
  output_dir: str,
  n_epochs: int,
  *bindings: str,
  flags: Sequence[str] = (),
) -> list[str]:
  """`trax-rl train` arguments for a tiny PolicyGradient run.

  Args:
    config_file: path of gin/pg_cartpole.gin.
    output_dir: the run's output directory.
    n_epochs: `train_rl.n_epochs`.
    *bindings: extra gin bindings, after the shrinking ones.
    flags: extra command-line flags.

  Returns:
    The argument list for `cli.main`.
  """
  args = ['train', '--config_file', str(config_file)]
  args += ['--output_dir', str(output_dir), '--no_progress', *flags]
  for b in (*TINY_PG_BINDINGS, f'train_rl.n_epochs = {n_epochs}', *bindings):
    args += ['--config', b]
  return args
