"""Writes the type stubs of the built `phasor` module (phasor.pyi) from the
signatures pybind11 writes into its docstrings, so they cannot drift from the
module: python3 python/stubgen.py OUT.pyi, with `phasor` importable.

C++ types pybind11 names without a Python equivalent (buffer, capsule, object)
become Any, and defaults become `...`; Python's bool is builtins.bool, as the
module's own `bool` is the dtype, and the class dtype is also DType (Tensor's
attribute dtype would hide it inside Tensor). The submodules nn and optim appear as
classes of the same name: one .pyi describes one module, and a type checker
resolves phasor.nn.Linear through them just the same; so does phasor.torch, whose
functions are Python's (their parameters from inspect, returning Any).
"""
import inspect
import re
import sys
import types

import phasor

SIGNATURE = re.compile(r"^(?:\d+\. )?(\w*)\((.*)\) -> (.+)$")  # a property's getter has no name
SKIPPED = {"__new__", "__init_subclass__", "__subclasshook__", "__getstate__", "__setstate__", "__reduce__", "__dir__",
           "__format__", "__sizeof__", "__reduce_ex__", "__getattribute__", "__setattr__", "__delattr__", "__init__"}


def py_type(text):
    text = text.strip().replace("phasor.nn.", "nn.").replace("phasor.optim.", "optim.").replace("phasor.", "")
    text = re.sub(r"\b(object|buffer|capsule|handle)\b", "Any", text)
    text = re.sub(r"\bfunction\b", "Callable[..., Any]", text)
    text = re.sub(r"\bIterable\b(?!\[)", "Iterable[Any]", text)
    text = re.sub(r"(?<![.\w])bool\b", "builtins.bool", text)  # the name bool is phasor.bool, the dtype, in this module
    return re.sub(r"(?<![.\w])dtype\b", "DType", text)  # Tensor.dtype, an attribute, would shadow the class in Tensor's body


def split_top_level(text):
    """Splits at the commas outside brackets (a default like <dtype.float32: 2> holds none)."""
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += ch in "[(<" and 1 or (ch in "])>" and -1 or 0)
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    return parts + [current] if current.strip() else parts


def parameter(text):
    name, _, rest = text.strip().partition(":")
    annotation, default, _ = rest.partition("=")
    name = name.strip()
    out = name if name == "self" or not annotation.strip() else f"{name}: {py_type(annotation)}"
    return out + (" = ..." if default else "")


def signatures(obj):
    """(parameters, return type) of each overload pybind11 documents for obj."""
    found = [SIGNATURE.match(line) for line in (obj.__doc__ or "").splitlines()]
    found = [m for m in found if m and m.group(2) != "*args, **kwargs"]
    return [(", ".join(parameter(p) for p in split_top_level(m.group(2))), py_type(m.group(3))) for m in found]


def python_signature(obj):
    """A function written in Python (phasor.torch's): its parameters, each default as `...`."""
    params = [p.replace(default=...) if p.default is not p.empty else p for p in inspect.signature(obj).parameters.values()]
    return [(str(inspect.Signature(params))[1:-1].replace("Ellipsis", "..."), "Any")]


def function(name, obj, indent, static=False):
    found = python_signature(obj) if isinstance(obj, types.FunctionType) else signatures(obj)
    overloads = found or [("*args: Any, **kwargs: Any", "Any")]
    lines = []
    for params, returns in overloads:
        if static:
            lines.append(f"{indent}@staticmethod")
        if len(overloads) > 1:
            lines.append(f"{indent}@overload")
        lines.append(f"{indent}def {name}({params}) -> {returns}: ...")
    return lines


def klass(name, cls, indent):
    bases = [b.__name__ for b in cls.__bases__ if b.__module__.startswith("phasor")]
    if issubclass(cls, Exception):
        bases = [b.__name__ for b in cls.__bases__]
    lines = [f"{indent}class {name}({', '.join(bases)}):" if bases else f"{indent}class {name}:"]
    inner = indent + "    "
    if hasattr(cls, "__members__"):  # a pybind11 enum
        lines += [f"{inner}{member}: {name}" for member in cls.__members__]
    for attr, value in vars(cls).items():
        if isinstance(value, property):
            returns = (signatures(value.fget) or [("", "Any")])[0][1]
            lines.append(f"{inner}{attr}: {returns}")
        elif attr == "__init__" or (callable(value) and attr not in SKIPPED and (not attr.startswith("_") or attr.endswith("__"))):
            lines += function(attr, value, inner)
    return lines + ([f"{inner}..."] if len(lines) == 1 else [])


def namespace(module, indent, static=False):
    lines = []
    for name in dir(module):
        value = getattr(module, name)
        if name.startswith("_"):
            continue
        if isinstance(value, type):
            lines += klass(name, value, indent)
        elif isinstance(value, types.ModuleType):
            lines += [f"{indent}class {name}:", *namespace(value, indent + "    ", static=True)]
        elif callable(value):
            lines += function(name, value, indent, static)
        else:
            kind = type(value)
            lines.append(f"{indent}{name}: {py_type(f'{kind.__module__}.{kind.__name__}') if kind.__module__ == 'phasor' else kind.__name__}")
    return lines


def main(out):
    text = ["# Generated by python/stubgen.py from the module's own signatures: do not edit.",
            "from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, Union, overload",
            "import builtins", "import numpy", "from typing_extensions import TypeAlias", "", *namespace(phasor, ""),
            "DType: TypeAlias = dtype", ""]
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(text))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: stubgen.py OUT.pyi")
    main(sys.argv[1])
