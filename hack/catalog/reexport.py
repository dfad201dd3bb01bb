"""`--from-torch` and `--compare-torch`: the reference PyTorch modules exported again (needs torch,
torchvision, torchaudio, transformers and onnxscript: the [catalog] extra)."""

from __future__ import annotations

import json

from catalog import graph_files, torch_export, torch_models
from catalog.entries import COMPARE_TORCH, ENTRIES
from horus_operator.prediction import features


def export_graphs(names: list[str]) -> None:
    """Re-export the graphs of the exported entries (all, or those named) into the package data."""
    unknown = set(names) - {entry.name for entry in ENTRIES if entry.export}
    if unknown:
        raise SystemExit(f"not exported entries: {', '.join(sorted(unknown))}")
    graph_files.GRAPHS_DIR.mkdir(parents=True, exist_ok=True)
    for entry in ENTRIES:
        if entry.export and (not names or entry.name in names):
            module, inputs = torch_models.BUILDERS[entry.export]()
            exported = torch_export.export(module, inputs, unused=torch_models.UNUSED.get(entry.export, ()))
            del module
            graph_files.path(entry.name).write_bytes(graph_files.compressed(exported.model))
            print(
                f"{entry.name}: {exported.profile['flops_per_sample'] / 1e9:.3f} GFLOP/sample, "
                f"{exported.torch_params:,} parameters",
                flush=True,
            )
    graph_files.VERSIONS_PATH.write_text(json.dumps(torch_export.versions(), indent=1) + "\n")


def compare(names: list[str]) -> int:
    """Print how each built entry's profile differs from its architecture exported with torch.onnx."""
    for entry in ENTRIES:
        key = COMPARE_TORCH.get(entry.name)
        if key is None or (names and entry.name not in names):
            continue
        built = features.profile_onnx(entry.build())
        module, inputs = torch_models.BUILDERS[key]()
        exported = torch_export.export(module, inputs).profile
        differences = [
            f"{field} {built[field]:.6g} → {exported[field]:.6g}"
            + (f" ({100 * (exported[field] - built[field]) / built[field]:+.2f}%)" if built[field] else "")
            for field in features.PROFILE_NAMES
            if exported[field] != built[field]
        ]
        print(f"{entry.name} (built → exported {key}): {'; '.join(differences) or 'identical'}", flush=True)
    return 0
