"""`trax-rl plot`: learning curves grouped by config, with IQM across seeds.

Runs of one config that differ only in their seed bindings are one group,
and so are the per-seed records (field `seed`) of a run that trains several
seeds in one process. A group is drawn as its mean curve with a band of one
standard deviation across seeds; `--iqm` adds the interquartile mean of the
seeds' values at a common env-step budget (the shortest run's), with a
stratified-bootstrap 95% interval. A seed counts once per group (two runs
of the same seed: the first), and runs that differ in budget or in the
metrics they have are warned about.
"""

import argparse
import dataclasses
import json
import logging
import os
import pathlib
import re
from typing import Any

X_AXES = {'steps': 'env steps', 'time': 'wall seconds'}
FORMATS = ('.png', '.pdf', '.svg', '.jpg')
DEFAULT_METRICS = ('eval_return_t0', 'episode_return_mean', 'avg_return')
_SEED_LINE = re.compile(r'^\s*[\w./]*\bseed\s*=', re.M)
_SEED_SUFFIX = re.compile(r'[_-](s|seed)?\d+$')
_SEED_VALUE = re.compile(r'^\s*(?:[\w.]*/)?([\w.]+)\.seed\s*=\s*(\d+)', re.M)
_LOG = logging.getLogger(__name__)


@dataclasses.dataclass
class Group:
  """The seeds of one config: one (x, y) curve per seed."""

  label: str
  runs: list[str]
  curves: dict[str, tuple[list[float], list[float]]]
  # Per curve: the env steps of its points (the x axis may be time).
  steps: dict[str, list[float]] = dataclasses.field(default_factory=dict)
  seeds: dict[str, str] = dataclasses.field(default_factory=dict)  # seed: curve


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


def default_metric(records_by_run: dict[str, list[dict[str, Any]]]) -> str:
  """The first of DEFAULT_METRICS (by prefix) that every run has.

  Warns when the runs' own first choices differ (some evaluate, some not).

  Raises:
    ValueError: no metric of DEFAULT_METRICS is common to all runs.
  """

  def has(records):
    return {k for r in records for k, v in r.items() if v is not None}

  keys = {run: has(rs) for run, rs in records_by_run.items()}
  common = set.intersection(*keys.values()) if keys else set()

  def first(names):
    for prefix in DEFAULT_METRICS:
      found = sorted(k for k in names if k.startswith(prefix))
      if found:
        return found[0]
    return None

  metric = first(common)
  if metric is None:
    raise ValueError(
      'the runs have no metric in common among ' + ', '.join(DEFAULT_METRICS)
    )
  own = {run: first(k) for run, k in keys.items()}
  differ = [run for run, m in own.items() if m != metric]
  if differ:
    _LOG.warning(
      'runs differ in metric: %s %s %s; plotting %s, which all runs have '
      '(--metric picks another)',
      differ[0],
      'has' if own[differ[0]] else 'has none of',
      own[differ[0]] or ', '.join(DEFAULT_METRICS),
      metric,
    )
  return metric


def run_seed(run: str) -> str | None:
  """The seed a run's config.gin binds (the agent's, else RLTask's)."""
  path = pathlib.Path(run, 'config.gin')
  if not path.exists():
    return None
  found = dict(_SEED_VALUE.findall(path.read_text()))
  agent = [v for k, v in found.items() if k != 'RLTask']
  return agent[0] if agent else found.get('RLTask')


def seed_curves(
  records: list[dict[str, Any]], metric: str, x: str
) -> dict[str, tuple[list[float], list[float], list[float]]]:
  """One (x, y, env steps) curve per seed (`seed` field; one if none)."""
  by_seed: dict[str, list[dict[str, Any]]] = {}
  for r in records:
    by_seed.setdefault(str(r.get('seed', '')), []).append(r)
  curves = {}
  for seed, rs in by_seed.items():
    rs = sorted(rs, key=lambda r: r['epoch'])
    elapsed, xs, ys, steps = 0.0, [], [], []
    for r in rs:
      elapsed += r.get('epoch_s') or (
        r.get('collect_s', 0) + r.get('train_s', 0)
      )
      if r.get(metric) is None:
        continue
      steps.append(float(r['n_interactions']))
      xs.append(steps[-1] if x == 'steps' else elapsed)
      ys.append(float(r[metric]))
    if xs:
      curves[seed] = (xs, ys, steps)
  return curves


def _label(run: str) -> str:
  name = os.path.basename(os.path.normpath(run))
  return _SEED_SUFFIX.sub('', name) or name


def group_runs(
  runs: list[str], metric: str | None, x: str
) -> tuple[list[Group], str]:
  """Groups runs by config; returns the groups and the metric used.

  Each seed counts once per group: a second run of the same seed (by its
  `seed` field or its config.gin's seed binding) is left out, with a
  warning.

  Raises:
    ValueError: a run has no metrics or no values of the metric.
  """
  from trax_rl import metrics

  records = {run: metrics.read(run) for run in runs}
  if metric is None:
    metric = default_metric(records)
  groups: dict[str, Group] = {}
  for run in runs:
    curves = seed_curves(records[run], metric, x)
    if not curves:
      raise ValueError(f'{run} has no values of {metric!r}')
    group = groups.setdefault(config_key(run), Group(_label(run), [], {}))
    group.runs.append(run)
    for seed, (xs, ys, steps) in curves.items():
      name = f'{run}:{seed}' if seed else run
      which = seed or run_seed(run)
      if which is not None and which in group.seeds:
        _LOG.warning(
          '%s and %s are both seed %s of %s: counting it once (%s)',
          group.seeds[which],
          name,
          which,
          group.label,
          group.seeds[which],
        )
        continue
      group.seeds[which if which is not None else name] = name
      group.curves[name] = (xs, ys)
      group.steps[name] = steps
  return list(groups.values()), metric


def budget(groups: list[Group]) -> float:
  """The common env-step budget: where the shortest curve ends.

  Warns when the curves end at different env steps.
  """
  ends = {name: steps[-1] for g in groups for name, steps in g.steps.items()}
  low = min(ends.values())
  if max(ends.values()) > low:
    short = min(ends, key=ends.get)
    _LOG.warning(
      'runs differ in budget (%d to %d env steps): the IQM compares every '
      'seed at %d env steps, where %s ends',
      low,
      max(ends.values()),
      low,
      short,
    )
  return low


def value_at(steps: list[float], ys: list[float], at: float) -> float:
  """The last value recorded at or before `at` env steps."""
  last = max(i for i, s in enumerate(steps) if s <= at) if steps[0] <= at else 0
  return ys[last]


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
  """IQM of the seeds' values at the common budget (`budget`), its 95% CI
  and the mean, per group."""
  import numpy as np

  from trax_rl import seed_stats

  at = budget(groups)
  rows = []
  for g in groups:
    finals = np.asarray(
      [value_at(g.steps[n], c[1], at) for n, c in g.curves.items()]
    )[:, None]
    low, high = seed_stats.stratified_bootstrap_ci(finals, reps=reps)
    rows.append(
      {
        'run': g.label,
        'seeds': len(finals),
        'env_steps': int(at),
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
    bx.set_xlabel(
      f'IQM of {metric} at {table[0]["env_steps"]} env steps\n'
      '(95% stratified bootstrap CI)'
    )
  fig.tight_layout()
  fig.savefig(out)
  plt.close(fig)


def format_table(metric: str, table: list[dict[str, Any]]) -> str:
  """The IQM table as markdown."""
  at = table[0]['env_steps'] if table else 0
  lines = [
    f'| run | seeds | IQM of {metric} at {at} env steps | 95% CI | mean |',
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
    summary['iqm_env_steps'] = table[0]['env_steps']
  print(json.dumps(summary))
