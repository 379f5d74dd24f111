"""docs/python-api.md lists the Python API: every public name of the module, of
its submodules and of Tensor appears there (as `name`, `nn.name`, ...)."""
import pathlib
import re
import types

import phasor

PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "python-api.md"


def public(obj):
    return {name for name in dir(obj) if not name.startswith("_")}


def test_every_public_name_is_on_the_page():
    text = PAGE.read_text()
    # The names the page writes as code (`nn.Linear`, `causal_attention(q, k, ...)`).
    named = {n for code in re.findall(r"`([^`]+)`", text) for n in re.findall(r"[\w.]+", code)}
    missing = []
    for name in sorted(public(phasor)):
        value = getattr(phasor, name)
        if isinstance(value, types.ModuleType):
            missing += [f"{name}.{n}" for n in sorted(public(value)) if f"{name}.{n}" not in named]
        elif name not in named:
            missing.append(name)
    tensor_members = public(phasor.Tensor) | {"__getitem__", "__setitem__", "__dlpack__", "__dlpack_device__", "__array__"}
    missing += [f"Tensor.{n}" for n in sorted(tensor_members) if n not in named and n not in {"name", "value"}]
    assert not missing, f"docs/python-api.md does not list: {', '.join(missing)}"
