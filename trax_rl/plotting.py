"""`trax-rl plot`: learning curves grouped by config, with IQM across seeds.

Runs of one config that differ only in their seed bindings are one group,
and so are the per-seed records (field `seed`) of a run that trains several
seeds in one process. A group is drawn as its mean curve with a band of one
standard deviation across seeds; `--iqm` adds the interquartile mean of the
seeds' final values with a stratified-bootstrap 95% interval.
"""

import argparse
import dataclasses
import json
import os
import pathlib
import re
from typing import Any

X_AXES = {'steps': 'env steps', 'time': 'wall seconds'}
FORMATS = ('.png', '.pdf', '.svg', '.jpg')
DEFAULT_METRICS = ('eval_return_t0', 'episode_return_mean', 'avg_return')
_SEED_LINE = re.compile(r'^\s*[\w./]*\bseed\s*=', re.M)
_SEED_SUFFIX = re.compile(r'[_-](s|seed)?\d+$')


@dataclasses.dataclass
class Group:
  """The seeds of one config: one (x, y) curve per seed."""

  label: str
  runs: list[str]
  curves: dict[str, tuple[list[float], list[float]]]


def add_parser(sub: Any) -> None:
  """Adds the `plot` subcommand to `trax-rl`'s subparsers."""
  plot = sub.add_parser('plot', help='plot learning curves of runs')
  plot.add_argument('runs', nargs='+', help='output directories of runs')
  plot.add_argument('--out', default='curves.png', help='the figure file')
  plot.add_argument(
    '--metric',
    default=None,
    help='metric to plot (default: greedy eval return, else '
    'episode_return_mean, else avg_return)',
  )
  plot.add_argument('--x', default='steps', choices=sorted(X_AXES))
  plot.add_argument(
    '--iqm',
    action='store_true',
    help='add the IQM of final values across seeds with stratified-'
    'bootstrap 95%% intervals; also printed as a table',
  )
  plot.add_argument('--reps', type=int, default=2000, help='bootstrap reps')


def config_key(run: str) -> str:
  """A run's config.gin without seed bindings and comments, or its path."""
  path = pathlib.Path(run, 'config.gin')
  if not path.exists():
    return os.path.abspath(run)
  lines = path.read_text().splitlines()
  kept = [
    ln.strip()
    for ln in lines
    if ln.strip()
    and not ln.lstrip().startswith('#')
    and not _SEED_LINE.match(ln)
  ]
  return '\n'.join(kept)


def default_metric(records: list[dict[str, Any]]) -> str:
  """The first of DEFAULT_METRICS (by prefix) the records have."""
  for prefix in DEFAULT_METRICS:
    for r in records:
      for k, v in r.items():
        if k.startswith(prefix) and v is not None:
          return k
  raise ValueError('the runs have none of ' + ', '.join(DEFAULT_METRICS))


def seed_curves(
  records: list[dict[str, Any]], metric: str, x: str
) -> dict[str, tuple[list[float], list[float]]]:
  """One (x, y) curve per seed (`seed` field; one curve if none)."""
  by_seed: dict[str, list[dict[str, Any]]] = {}
  for r in records:
    by_seed.setdefault(str(r.get('seed', '')), []).append(r)
  curves = {}
  for seed, rs in by_seed.items():
    rs = sorted(rs, key=lambda r: r['epoch'])
    elapsed, xs, ys = 0.0, [], []
    for r in rs:
      elapsed += r.get('epoch_s') or (
        r.get('collect_s', 0) + r.get('train_s', 0)
      )
      if r.get(metric) is None:
        continue
      xs.append(float(r['n_interactions']) if x == 'steps' else elapsed)
      ys.append(float(r[metric]))
    if xs:
      curves[seed] = (xs, ys)
  return curves


def _label(run: str) -> str:
  name = os.path.basename(os.path.normpath(run))
  return _SEED_SUFFIX.sub('', name) or name


def group_runs(
  runs: list[str], metric: str | None, x: str
) -> tuple[list[Group], str]:
  """Groups runs by config; returns the groups and the metric used.

  Raises:
    ValueError: a run has no metrics or no values of the metric.
  """
  from trax_rl import metrics

  records = {run: metrics.read(run) for run in runs}
  if metric is None:
    metric = default_metric([r for rs in records.values() for r in rs])
  groups: dict[str, Group] = {}
  for run in runs:
    curves = seed_curves(records[run], metric, x)
    if not curves:
      raise ValueError(f'{run} has no values of {metric!r}')
    group = groups.setdefault(config_key(run), Group(_label(run), [], {}))
    group.runs.append(run)
    for seed, curve in curves.items():
      name = f'{run}:{seed}' if seed else run
      group.curves[name] = curve
  return list(groups.values()), metric


def mean_curve(group: Group):
  """(x, mean, std) across the group's seeds, on a common x grid."""
  import numpy as np

  curves = list(group.curves.values())
  xs0 = curves[0][0]
  if all(c[0] == xs0 for c in curves):
    grid = np.asarray(xs0)
  else:  # Different x values: interpolate where all seeds have data.
    start = max(c[0][0] for c in curves)
    end = min(c[0][-1] for c in curves)
    grid = np.linspace(start, end, 100) if end > start else np.asarray([end])
  ys = np.stack([np.interp(grid, c[0], c[1]) for c in curves])
  return grid, ys.mean(0), ys.std(0)


def iqm_table(groups: list[Group], reps: int) -> list[dict[str, Any]]:
  """IQM of the seeds' final values, its 95% CI and the mean, per group."""
  import numpy as np

  from trax_rl import seed_stats

  rows = []
  for g in groups:
    finals = np.asarray([c[1][-1] for c in g.curves.values()])[:, None]
    low, high = seed_stats.stratified_bootstrap_ci(finals, reps=reps)
    rows.append(
      {
        'run': g.label,
        'seeds': len(finals),
        'iqm': seed_stats.iqm(finals),
        'ci_low': low,
        'ci_high': high,
        'mean': seed_stats.mean(finals),
      }
    )
  return rows


def _check_args(args) -> None:
  from trax_rl import validation

  validation.check_count('--reps', args.reps, 1)
  if os.path.splitext(args.out)[1].lower() not in FORMATS:
    raise ValueError(
      f'--out {args.out} must end in one of {", ".join(FORMATS)}'
    )
  parent = os.path.dirname(os.path.abspath(args.out))
  if not os.path.isdir(parent) or not os.access(parent, os.W_OK):
    raise ValueError(f'--out {args.out}: {parent} is not a writable directory')
  for run in args.runs:
    if not os.path.isdir(run):
      raise ValueError(f'run {run} is not a directory')


def _draw(groups, metric, x, table, out) -> None:
  import matplotlib

  matplotlib.use('Agg')
  import matplotlib.pyplot as plt

  n = 2 if table else 1
  fig, axes = plt.subplots(
    1,
    n,
    figsize=(7 + 3 * (n - 1), 4),
    squeeze=False,
    gridspec_kw={'width_ratios': [7, 3][:n]},
  )
  ax = axes[0, 0]
  for g in groups:
    grid, mean, std = mean_curve(g)
    line = ax.plot(grid, mean, label=f'{g.label} ({len(g.curves)} seeds)')
    if len(g.curves) > 1:
      ax.fill_between(
        grid, mean - std, mean + std, alpha=0.2, color=line[0].get_color()
      )
  ax.set_xlabel(X_AXES[x])
  ax.set_ylabel(metric)
  ax.legend()
  if table:
    bx = axes[0, 1]
    for i, row in enumerate(table):
      bx.errorbar(
        row['iqm'],
        i,
        xerr=[[row['iqm'] - row['ci_low']], [row['ci_high'] - row['iqm']]],
        fmt='o',
        capsize=4,
      )
    bx.set_yticks(range(len(table)), [r['run'] for r in table])
    bx.set_xlabel(f'IQM of final {metric}\n(95% stratified bootstrap CI)')
  fig.tight_layout()
  fig.savefig(out)
  plt.close(fig)


def format_table(metric: str, table: list[dict[str, Any]]) -> str:
  """The IQM table as markdown."""
  lines = [
    f'| run | seeds | IQM of final {metric} | 95% CI | mean |',
    '|---|---|---|---|---|',
  ]
  for r in table:
    lines.append(
      f'| {r["run"]} | {r["seeds"]} | {r["iqm"]:.1f} | '
      f'[{r["ci_low"]:.1f}, {r["ci_high"]:.1f}] | {r["mean"]:.1f} |'
    )
  return '\n'.join(lines)


def run(args: argparse.Namespace) -> None:
  """`trax-rl plot`: draws the figure, prints the IQM table and a summary."""
  _check_args(args)
  groups, metric = group_runs(args.runs, args.metric, args.x)
  table = iqm_table(groups, args.reps) if args.iqm else None
  _draw(groups, metric, args.x, table, args.out)
  if table:
    print(format_table(metric, table))
  summary = {
    'plot': os.path.abspath(args.out),
    'metric': metric,
    'groups': {g.label: g.runs for g in groups},
  }
  if table:
    summary['iqm'] = table
  print(json.dumps(summary))
