"""Packaging for trax_rl."""

import setuptools

setuptools.setup(
    name='trax_rl',
    version='0.1.0',
    description=(
        "Trax's reinforcement-learning framework and the Acme JAX value "
        'learners on the current JAX stack.'
    ),
    packages=setuptools.find_packages(include=['trax_rl', 'trax_rl.*']),
    python_requires='>=3.11',
    install_requires=[
        'jax>=0.10,<0.11',
        'flax>=0.12',
        'optax>=0.2.6',
        'rlax>=0.1.9',
        'chex>=0.1.90',
        'gin-config>=0.5',
        'gymnasium[classic-control]>=1.1,<1.4',
        # JAX-native envs for the device path; gymnax 1.x keeps terminated and
        # truncated apart (and pins gymnasium < 1.4).
        'gymnax>=1.0.1',
        'numpy>=2.0',
        'etils[epath]>=1.10',
        'tensorboardX>=2.6',
        'tqdm>=4.66',
        'matplotlib>=3.8',
    ],
    extras_require={
        # box2d: the LunarLander config is checked and run like the others.
        'test': [
            'pytest>=8',
            'pytest-xdist>=3.6',
            'ruff>=0.6',
            'gymnasium[box2d]>=1.1,<1.4',
            # The Ray rollout tests are part of the default suite.
            'ray>=2.60',
            'psutil>=5.9',
        ],
        # AtariPreprocessing needs OpenCV.
        'atari': ['ale-py>=0.10', 'opencv-python-headless>=4.8'],
        'box2d': ['gymnasium[box2d]>=1.1,<1.4'],
        # Rollout actors (RayCollector): Ray core, no dashboard.
        'ray': ['ray>=2.60'],
    },
    entry_points={'console_scripts': ['trax-rl=trax_rl.cli:main']},
)
