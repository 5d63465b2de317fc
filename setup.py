"""Packaging for trax_rl."""

import pathlib
import shutil

import setuptools
from setuptools.command import build_py

ROOT = pathlib.Path(__file__).resolve().parent


class BuildPyWithConfigs(build_py.build_py):
  """Also copies gin/ (and the measured results) into trax_rl/configs/.

  The configs stay in the repository's gin/ folder, where the README and the
  tests name them; a built package carries them so that
  `trax-rl train --config=dqn_cartpole` finds them from any directory.
  """

  def run(self):
    super().run()
    target = pathlib.Path(self.build_lib) / 'trax_rl' / 'configs'
    if target.exists():
      shutil.rmtree(target)
    shutil.copytree(ROOT / 'gin', target)
    shutil.copy(ROOT / 'benchmarks' / 'results.json', target / 'results.json')


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
        # The device replay's prioritized sampling: flashbax's sum tree.
        'flashbax>=0.1.3',
        'numpy>=2.0',
        'etils[epath]>=1.10',
        'tensorboardX>=2.6',
        'tqdm>=4.66',
        # Bounds the persistent compilation cache (trax_rl.compile_cache):
        # JAX evicts least recently used entries only with filelock.
        'filelock>=3.12',
        'matplotlib>=3.8',
        # `trax-rl eval --video`: mp4 through ffmpeg, gif through pillow.
        'imageio>=2.30',
        'imageio-ffmpeg>=0.5',
    ],
    extras_require={
        # box2d: the LunarLander config is checked and run like the others.
        'test': [
            'pytest>=8',
            'pytest-xdist>=3.6',
            'ruff>=0.6',
            'gymnasium[box2d]>=1.1,<1.4',
            # The notebooks in colabs/ are executed by tests/test_colabs.py.
            'nbclient>=0.10',
            'nbformat>=5.10',
            'ipykernel>=6.29',
            # The Ray rollout tests are part of the default suite.
            'ray>=2.60',
            'psutil>=5.9',
            # tests/test_tracking.py logs to W&B in offline mode.
            'wandb>=0.19.10',
            # tests/test_docs.py builds the site with --strict.
            'mkdocs-material>=9.5',
            'mkdocstrings[python]>=0.26',
            # SAC on HalfCheetah and PPO/SAC on Brax envs are smoke-tested.
            'gymnasium[mujoco]>=1.1,<1.4',
            'brax>=0.12',
            # 'envpool:<id>' envs and gin/atari/*.gin are tested on envpool.
            'envpool>=1.2.5',
        ],
        # AtariPreprocessing needs OpenCV.
        'atari': ['ale-py>=0.10', 'opencv-python-headless>=4.8'],
        # 'envpool:<id>' envs (C++ vector envs; Atari with its ROMs): the
        # Atari configs' default backend. envpool requires its asset
        # packages, MuJoCo models included (~600 MB installed).
        'envpool': ['envpool>=1.2.5'],
        'box2d': ['gymnasium[box2d]>=1.1,<1.4'],
        # MuJoCo envs through gymnasium (HalfCheetah-v5, ...).
        'mujoco': ['gymnasium[mujoco]>=1.1,<1.4'],
        # Brax envs on the device path ('brax:<name>' env ids).
        'brax': ['brax>=0.12'],
        # Rollout actors (RayCollector): Ray core, no dashboard.
        'ray': ['ray>=2.60'],
        # `trax-rl train --track`: Weights & Biases (trax_rl.tracking).
        'wandb': ['wandb>=0.19.10'],
        # The documentation site: mkdocs build --strict (mkdocs.yml).
        'docs': ['mkdocs-material>=9.5', 'mkdocstrings[python]>=0.26'],
    },
    cmdclass={'build_py': BuildPyWithConfigs},
    entry_points={'console_scripts': ['trax-rl=trax_rl.cli:main']},
)
