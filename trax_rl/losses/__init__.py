"""trax_rl.losses: pure loss functions.

q_learning: the Acme-family value losses (DQN, DQNReg, M-DQN, prioritized
double Q, C51, QR-DQN) as frozen dataclasses, and `importance_weights`.
"""
