"""One DLJob's decisions: its workload resolved (`jobspec`, off the loop for graphs: `graphs`), its template
checked (`template`, `tenancy`), its next state decided (`reconcile`, pure) and its pod built and read
(`pods`, pure), a pod's out-of-memory ending forgiven once (`oom`, pure); `feasibility` words what no
node of the cluster can give."""
