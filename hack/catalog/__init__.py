"""hack/gen_catalog.py's parts: the entries, the reference PyTorch modules and their export, checks."""
