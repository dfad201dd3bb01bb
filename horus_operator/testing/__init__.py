"""Helpers for tests and benchmarks, shipped with the package (as `kopf.testing` is) so that unit tests,
e2e tests and `bench/` scripts build their objects one way without path tricks. The operator, agent and
simulator never import it; it imports only `api`, `devcluster` (the operator process) and
`placement.index` (what a policy reads of an index, `indexes.views`)."""
