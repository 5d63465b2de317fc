"""What Trax RL's gin names become in trax_rl (the tables of trax_compat).

Gin names, not module paths: `trax.rl.PPOJoint` is whatever trax_rl
registers in gin as `PPOJoint`, wherever its class lives.
"""

AGENTS = (
  'DQN',
  'PolicyGradient',
  'ExpertIteration',
  'PPO',
  'A2C',
  'AWR',
  'SamplingAWR',
  'PPOJoint',
  'A2CJoint',
  'AWRJoint',
)
# Trax configurables with a trax_rl configurable of the same gin name.
SAME = frozenset(
  AGENTS
  + ('train_rl', 'RLTask', 'MLP', 'Policy', 'Value', 'PolicyAndValue')
  + ('Quality', 'multifactor', 'td_k', 'td_lambda', 'gae', 'monte_carlo')
  + ('Adam', 'RMSProp', 'Momentum', 'SGD', 'sharpened_network_policy')
)
NOT_PORTED = {
  'TransformerDecoder': 'trax_rl networks are MLP and ConvTorso: use @MLP',
  'TransformerLM': 'trax_rl networks are MLP and ConvTorso: use @MLP',
  'AtariCnnBody': 'use gin/atari/*.gin (ConvTorso on ALE/Pong-v5)',
  'AtariConvInit': 'use gin/atari/*.gin (ConvTorso on ALE/Pong-v5)',
  'LoopAWR': 'trax_rl has no LoopAWR: use AWR',
  'every': 'only LoopAWR used it: use AWR',
  'SequenceDataEnv': "Trax's sequence envs are not ported: use a gymnasium id",
  'copy_stream': "Trax's sequence envs are not ported: use a gymnasium id",
  'Adafactor': "Trax's Adafactor is not ported: use @Adam",
}
UNSUPPORTED_PARAMS = {
  ('RLTask', 'dm_suite'): "Trax's DeepMind Atari wrapper: use gin/atari/*.gin",
  ('RLTask', 'num_stacked_frames'): 'use gin/atari/*.gin (frame stacking)',
  ('RLTask', 'random_starts'): 'use gin/atari/*.gin',
  ('RLTask', 'time_limit'): 'use RLTask.max_steps',
  ('Policy', 'batch_axes'): 'trax_rl policies take [B, ...] observations',
  ('Value', 'batch_axes'): 'trax_rl value nets take [B, ...] observations',
  ('PolicyAndValue', 'policy_top'): 'trax_rl PolicyAndValue has Dense heads',
  ('PolicyAndValue', 'value_top'): 'trax_rl PolicyAndValue has Dense heads',
}
# Trax defaults that differ from trax_rl's, written out when not bound.
TRAX_DEFAULTS = {
  # Trax's tl.Dense: Glorot uniform kernels, N(0, 1e-6) biases.
  'MLP': {
    'layer_widths': '(128, 64)',
    'out_activation': 'False',
    'dense_init': "'glorot'",
  },
  'Quality': {'dense_init': "'glorot'"},
  # Trax's DQN builds its net with the gin-configurable `Quality`.
  'DQN': {'value_model': '@Quality'},
  'PolicyGradient': {'optimizer': '@Adam', 'lr_schedule': '@multifactor'},
  'ExpertIteration': {'optimizer': '@Adam', 'lr_schedule': '@multifactor'},
}
# Trax's joint agents used Monte Carlo returns minus values.
TRAX_DEFAULTS.update(
  dict.fromkeys(
    ('PPOJoint', 'A2CJoint', 'AWRJoint'),
    {'advantage_estimator': '@monte_carlo'},
  )
)
# Configurables an agent or model calls by default, in Trax and here.
IMPLICIT = {
  'DQN': ('Quality',),
  'PolicyGradient': ('Policy', 'Gaussian'),
  'ExpertIteration': ('Policy', 'Gaussian'),
  'PPOJoint': ('PolicyAndValue', 'Gaussian'),
  'A2CJoint': ('PolicyAndValue', 'Gaussian'),
  'AWRJoint': ('PolicyAndValue', 'Gaussian'),
  'PolicyAndValue': ('Policy', 'Value'),  # Trax's policy_top, value_top.
}
IMPLICIT.update(
  dict.fromkeys(
    ('PPO', 'A2C', 'AWR', 'SamplingAWR'), ('Policy', 'Value', 'Gaussian')
  )
)
LR_SCHEDULES = ('lr_schedule', 'policy_lr_schedule', 'value_lr_schedule')
# Trax's Normalize layer's knobs: the agent's observation normalization.
NORMALIZE = {
  'sample_limit': 'normalization_sample_limit',
  'epsilon': 'normalization_epsilon',
}
