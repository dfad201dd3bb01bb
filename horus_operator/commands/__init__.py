"""The `horus` subcommands, one module each, imported only when used (see `cli.py`).

Contract: parse flags into settings objects and hand them to the shell that does the work (`operator`,
`agent`, `sim`, `devcluster`) or to `prediction`; print the results. No command imports the Kubernetes
client or kopf (`.importlinter`); a command that needs an optional extra (`horus train`) imports it
inside the command and names the extra when it is missing.
"""
