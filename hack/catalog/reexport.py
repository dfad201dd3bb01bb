"""`--from-torch`: the reference PyTorch modules exported again into the package data (needs torch,
torchvision, torchaudio, transformers and onnxscript: the [catalog] extra)."""

from __future__ import annotations

import json

import torch

from catalog import graph_files, torch_export, torch_models
from catalog.entries import ENTRIES


def export_graphs(names: list[str]) -> None:
    """Re-export the graphs of the entries (all, or those named)."""
    unknown = set(names) - {entry.name for entry in ENTRIES}
    if unknown:
        raise SystemExit(f"no such entries: {', '.join(sorted(unknown))}")
    for entry in ENTRIES:
        if names and entry.name not in names:
            continue
        if entry.reference:
            _check_reference(entry.name, entry.reference, entry.published_params)
        torch.manual_seed(0)  # frozen target networks keep their (random) values as constants
        module, inputs = torch_models.BUILDERS[entry.key]()
        exported = torch_export.export(module, inputs, unused=torch_models.UNUSED.get(entry.key, ()))
        del module
        graph_files.path(entry.name).write_bytes(graph_files.compressed(exported.model))
        print(
            f"{entry.name}: {exported.profile['flops_per_sample'] / 1e9:.3f} GFLOP/sample, "
            f"{exported.torch_params:,} parameters",
            flush=True,
        )
    graph_files.VERSIONS_PATH.write_text(json.dumps(torch_export.versions(), indent=1) + "\n")


def _check_reference(name: str, reference: str, published: int | None) -> None:
    """An entry that differs from the published configuration (another head): that configuration's
    module must hold the published parameter count."""
    module, _ = torch_models.BUILDERS[reference]()
    params = torch_export.parameter_count(module)
    if params != published:
        raise SystemExit(
            f"{name}: {reference} has {params:,} parameters, the published count is {published:,}"
        )
