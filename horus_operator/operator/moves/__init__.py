"""Moving running jobs that allow it: a move as the job's status records it (`migration`, pure) and the
loop's part, which records the shared cycle's moves and holds their targets (`mover`)."""
