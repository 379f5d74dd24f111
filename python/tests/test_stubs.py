"""python/stubgen.py writes type stubs that parse and describe every public
name of the module, with the signatures pybind11 documents."""
import ast
import pathlib
import subprocess
import sys

import phasor

STUBGEN = pathlib.Path(__file__).resolve().parents[1] / "stubgen.py"


def defined(body):
    """Names a class or module body defines: classes, functions, annotated attributes."""
    out = {}
    for node in body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            out[node.name] = node
        elif isinstance(node, ast.AnnAssign):
            out[node.target.id] = node
    return out


def test_the_stubs_cover_the_module(tmp_path):
    out = tmp_path / "phasor.pyi"
    subprocess.run([sys.executable, str(STUBGEN), str(out)], check=True)
    stub = defined(ast.parse(out.read_text()).body)
    public = {name for name in dir(phasor) if not name.startswith("_")}
    assert public <= set(stub), public - set(stub)
    tensor = defined(stub["Tensor"].body)
    for name in ("__getitem__", "__setitem__", "__iadd__", "add_", "__dlpack__", "backward", "shape", "grad", "real"):
        assert name in tensor, name
    nn = defined(stub["nn"].body)
    assert {name for name in dir(phasor.nn) if not name.startswith("_")} <= set(nn)
    assert {name for name in dir(phasor.optim) if not name.startswith("_")} <= set(defined(stub["optim"].body))
    assert {name for name in dir(phasor.torch) if not name.startswith("_")} <= set(defined(stub["torch"].body))
    text = out.read_text()
    assert "def from_dlpack(x: Any, *, copy: Optional[builtins.bool] = ...) -> Tensor: ..." in text
    assert "    def forward(self, x: Tensor) -> Tensor: ..." in text
