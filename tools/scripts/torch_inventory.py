"""The inventory of PyTorch's documentation that the site's links into it are resolved from.

    python tools/scripts/torch_inventory.py        # writes book/_inventories/torch.inv

The API page's type hints (a ``Tensor``, an ``nn.Module``, a ``torch.device``) link to PyTorch's
documentation through Sphinx's intersphinx, which looks each name up in an inventory. PyTorch
publishes its own (``objects.inv`` beside its pages), but the book builds offline, and the machines
that build it cannot reach pytorch.org: the inventory is committed, and this script writes it.

It holds the PyTorch objects the package names (``OBJECTS``), each on the page PyTorch documents
it: most on ``generated/<name>.html``, the tensor on ``tensors.html``, devices and dtypes on
``tensor_attributes.html``. A class is listed under its public name (``torch.nn.Linear``) and under
the name its code gives it (``torch.nn.modules.linear.Linear``), which is the one autodoc writes. A
name the book starts to use and this list lacks stays plain text: add it here and run the script.
"""

from __future__ import annotations

import importlib
import sys
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from transformer_lib.files import write_bytes  # noqa: E402

OUT = ROOT / "book" / "_inventories" / "torch.inv"
BASE = "https://docs.pytorch.org/docs/stable/"  # _config.yml's intersphinx_mapping names it too

# name -> (role, page); None: the page of its own, generated/<name>.html
OBJECTS: dict[str, tuple[str, str | None]] = {
    "torch.Tensor": ("class", "tensors.html"),
    "torch.device": ("class", "tensor_attributes.html"),
    "torch.dtype": ("class", "tensor_attributes.html"),
    "torch.Generator": ("class", None),
    "torch.autocast": ("class", "amp.html"),
    "torch.compile": ("function", None),
    "torch.nn.Module": ("class", None),
    "torch.nn.ModuleList": ("class", None),
    "torch.nn.Parameter": ("class", None),
    "torch.nn.Linear": ("class", None),
    "torch.nn.Embedding": ("class", None),
    "torch.nn.Dropout": ("class", None),
    "torch.nn.LayerNorm": ("class", None),
    "torch.nn.MultiheadAttention": ("class", None),
    "torch.nn.Transformer": ("class", None),
    "torch.nn.TransformerEncoder": ("class", None),
    "torch.nn.TransformerDecoder": ("class", None),
    "torch.nn.TransformerEncoderLayer": ("class", None),
    "torch.nn.TransformerDecoderLayer": ("class", None),
    "torch.nn.functional.scaled_dot_product_attention": ("function", None),
    "torch.nn.functional.cross_entropy": ("function", None),
    "torch.optim.Optimizer": ("class", "optim.html"),
    "torch.optim.Adam": ("class", None),
    "torch.optim.AdamW": ("class", None),
    "torch.optim.lr_scheduler.LRScheduler": ("class", None),
    "torch.optim.lr_scheduler.LambdaLR": ("class", None),
}


def resolve(name: str):
    """The object ``name`` names, imported."""
    module, _, attribute = name.rpartition(".")
    return getattr(importlib.import_module(module), attribute)


def entries() -> list[str]:
    """The inventory's lines: ``name domain:role priority uri display``, each class under both its names."""
    lines = []
    for name, (role, page) in OBJECTS.items():
        uri = f"{page or f'generated/{name}.html'}#{name}"
        names = [name]
        obj = resolve(name)
        if role == "class" and isinstance(obj, type):
            coded = f"{obj.__module__}.{obj.__qualname__}"
            if coded != name:
                names.append(coded)
        lines += [f"{n} py:{role} 1 {uri} {name}" for n in names]
    return sorted(lines)


def main() -> int:
    header = (
        "# Sphinx inventory version 2\n"
        "# Project: PyTorch\n"
        f"# Version: {torch.__version__.split('+')[0]}\n"
        "# The remainder of this file is compressed using zlib.\n"
    )
    body = zlib.compress(("\n".join(entries()) + "\n").encode("utf-8"), 9)
    write_bytes(OUT, header.encode("utf-8") + body)
    print(f"{OUT.relative_to(ROOT)}: {len(entries())} names of {len(OBJECTS)} PyTorch objects")
    return 0


if __name__ == "__main__":
    sys.exit(main())
