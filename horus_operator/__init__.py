"""Horus: an interference-aware GPU scheduler for deep-learning training jobs on Kubernetes.

Layout (the rule is written in `.importlinter` and checked by `make lint`):
- `prediction/` and `placement/` are the pure core: no Kubernetes, no processes, no clocks of their own.
- `operator/`, `agent/`, `sim/`, `devcluster/` are shells around that core; `commands/` and `cli.py`
  are the command line.
"""

__version__ = "0.1.0"
