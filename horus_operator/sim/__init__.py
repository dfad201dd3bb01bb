"""Simulator: replays job traces through the placement policies the operator runs (`horus simulate`),
against a truth table of measured co-location slowdowns.

Contract: a shell around `placement` and `prediction`, with no Kubernetes, no kopf and no processes
(`.importlinter` checks it): it reads its trace and truth files, writes reports under the output
directory it is given, and nothing else. Time is the simulation's own event clock and randomness a
seeded `random.Random` passed in: nothing reads the wall clock or the global RNG, so a seed reproduces a
run. It never imports `operator`, `agent` or `devcluster`.
"""
