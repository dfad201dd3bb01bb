"""Training pipelines: measurement CSV -> cross-validated metrics -> model files with metadata.

`horus train` and `hack/train_models.py` (which regenerates the shipped models) both call
`slowdown_fit.train_slowdown` (which also calibrates the memory model on the pairs' feasibility); the
roofline constants behind utilization come from measured step times (`roofline_fit.train_step_times`,
the shipped models) or measured utilizations (`roofline_fit.train_utilization`, `horus train`);
`memory_fit.train_memory` fits the memory envelope to measured peaks. `common` holds what they share,
`families` the architecture families held out together.

Only this package (with `datasets` and `validation`) imports the optional `train` extra.
"""
