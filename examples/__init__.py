"""Runnable examples, installed with the package as ``pxla_mlir.examples``.

    pxla-mlir example --list                 # each example, with what it shows
    pxla-mlir example train_step             # copy train_step.py into the current directory
    pxla-mlir example train_step --run       # run it (here: its map on its declared example inputs)
    pxla-mlir example collective_bytes       # copy a pass plugin (plugins/), with the pxla-opt line that loads it

:data:`EXAMPLES` names each one: its file here, and what ``--run`` runs.
"""

#: name -> (file in this folder, the function ``pxla-mlir run`` runs with its declared example inputs;
#: None: the file itself runs, a Python script as ``python FILE`` and a module as ``pxla-mlir run FILE``).
EXAMPLES: dict[str, tuple[str, str | None]] = {
    "pmap_demo": ("pmap_demo.py", None),
    "train_step": ("train_step.py", "train_step"),
    "nested_reduction": ("nested_reduction.py", "two_level_sum"),
    "xmap_2d": ("xmap_2d.py", "normalise_2d"),
    "per_device_psum": ("per_device_psum.mlir", None),
    # Pass plugins: pxla-opt loads them (--load-pass-plugin); pxla-mlir example lists and copies them.
    "collective_bytes": ("plugins/collective_bytes.py", None),
    "unshard_as_all_gather": ("plugins/unshard_as_all_gather.py", None),
}
