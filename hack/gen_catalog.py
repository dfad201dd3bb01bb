"""Generate horus_operator/prediction/data/catalog.json from real computation graphs.

Every catalog entry's graph is its reference PyTorch module (torchvision, Hugging Face transformers
built from a config in code, torchaudio, or a module written in catalog/torch_models.py after the
reference repository the entry cites) exported by torch.onnx as a graph-only ONNX model (weights as
shapes without data). The graphs are shipped in horus_operator/prediction/data/graphs/ and read from
there, so generating and checking need no torch (`--from-torch` re-exports them, which does); each is
profiled by the same `graph_profile.profile_onnx` that `horus features MODEL.onnx` runs. Where a parameter
count is published (torchvision's model tables, Hugging Face's model cards, Keras' applications) the
generator checks the graph against it and refuses to write a catalog that disagrees.

    python hack/gen_catalog.py                  # rewrite the catalog and docs/catalog.md
    python hack/gen_catalog.py --check          # exit 1 if either committed file is stale
    python hack/gen_catalog.py --crosscheck     # compare FLOPs with onnx-tool (pip install -e '.[catalog]')
    python hack/gen_catalog.py --from-torch [NAME ...]   # re-export graphs (the [catalog] extra), then
                                                # rewrite the catalog

The parts: catalog/entries.py (the table), catalog/checks.py (published counts, aliases),
catalog/docs.py (docs/catalog.md), catalog/crosscheck.py (onnx-tool), catalog/reexport.py (torch).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from catalog import checks, crosscheck, docs, graph_files
from catalog.entries import ENTRIES

from horus_operator.prediction import features, graph_profile

CATALOG_PATH = graph_files.REPO / "horus_operator/prediction/data/catalog.json"
DOCS_PATH = graph_files.REPO / "docs/catalog.md"
FORWARD_ONLY = "forward pass of the model as trained; backward ≈ 2× forward is not in the graph"
CONVENTIONS = {
    "flops": "forward-pass FLOPs, a multiply-add counted as 2; " + FORWARD_ONLY,
    "profile": "batch-independent: *_per_sample scale with the batch size, everything else is per model; "
    "features.at_batch(profile, b) gives the features at batch size b",
    # Names the function where it was when the shipped models were trained (now graph_profile.profile_onnx):
    # catalog.json's bytes are in their metadata (catalog_sha256), so in the model identity that persisted
    # online corrections are tied to. Rename it when the models are next retrained.
    "graphs": "graph-only ONNX profiled by features.profile_onnx: the torch.onnx export of the reference "
    "PyTorch module, shipped in data/graphs/",
}


def build_catalog() -> dict[str, Any]:
    models: dict[str, dict[str, Any]] = {}
    for entry in ENTRIES:
        profile = graph_profile.profile_onnx(entry.graph())
        checks.published_params(entry, profile)
        models[entry.name] = {
            "aliases": list(entry.aliases),
            "task": entry.task,
            "dataset": entry.dataset,
            "sample": entry.sample,
            "source": entry.source,
            "assumptions": list(entry.assumptions),
            "workloads": list(entry.groups),
            "published_params_checked": entry.published_params is not None,
            "profile": {name: _number(profile[name]) for name in features.PROFILE_NAMES},
        }
    checks.aliases(models)
    return {"generated_by": "hack/gen_catalog.py", "conventions": CONVENTIONS, "models": models}


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else round(value, 3)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="compare with the committed files, write nothing")
    mode.add_argument("--crosscheck", nargs="*", metavar="NAME", help="compare FLOPs with onnx-tool")
    mode.add_argument(
        "--from-torch",
        nargs="*",
        metavar="NAME",
        help="re-export the graphs of the entries (all, or those named; needs torch)",
    )
    args = parser.parse_args()
    if args.from_torch is not None:
        from catalog import reexport  # torch

        reexport.export_graphs(args.from_torch)
    if args.crosscheck is not None:
        return crosscheck.run(
            [entry for entry in ENTRIES if not args.crosscheck or entry.name in args.crosscheck]
        )
    catalog = build_catalog()
    outputs = {
        CATALOG_PATH: (json.dumps(catalog, indent=1, ensure_ascii=False) + "\n").encode(),
        DOCS_PATH: docs.render(catalog).encode(),
    }
    expected = {graph_files.path(entry.name) for entry in ENTRIES}
    strays = sorted(set(graph_files.GRAPHS_DIR.glob("*.onnx.gz")) - expected)
    if args.check:
        stale = [path for path, data in outputs.items() if not path.exists() or path.read_bytes() != data]
        for path in stale + strays:
            print(f"{path} is stale: run python hack/gen_catalog.py", file=sys.stderr)
        return 1 if stale or strays else 0
    for path in strays:  # the graph of an entry that is gone
        path.unlink()
    for path, data in outputs.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    print(f"wrote {len(catalog['models'])} models to {CATALOG_PATH} and {DOCS_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
