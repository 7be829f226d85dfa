"""The backend registry (evaluator/judges/backends/registry.py) is the one place that names a
backend: no other module compares a judge's backend with a name or spells one out; each
record's module is imported only when a judge loads; models.yaml accepts exactly the
registry's names, with the same error as before for any other."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import yaml

from evaluator.judges.backends import BackendUnavailable, load_backend
from evaluator.judges.backends.registry import BACKENDS
from evaluator.judges.models_file import JudgeConfigError, JudgeSpec, load_models_file

PACKAGE = Path(__file__).resolve().parent.parent / "evaluator"
REGISTRY = PACKAGE / "judges" / "backends" / "registry.py"
# Where a string equal to a backend's name means something else: a Python package, a
# distribution whose version the manifest records, a logger, or doctor's check of the
# installed vLLM. (Testing a judge's backend against names is refused everywhere.)
NOT_A_BACKEND = {
    ("evaluator/cli/main.py", "transformers"),  # the transformers logger
    ("evaluator/doctor/cuda.py", "vllm"),  # the vllm check, the vllm requirement
    ("evaluator/doctor/probes.py", "vllm"),  # the vllm package
    ("evaluator/run/manifest.py", "transformers"),  # distributions in PACKAGES
    ("evaluator/run/manifest.py", "vllm"),
    # a server judge's structured_output: vLLM's request field, not the vllm backend
    ("evaluator/judges/backends/server_protocol.py", "vllm"),
    ("evaluator/judges/backends/server_settings.py", "vllm"),
}
# What a judge of each backend needs besides its name: a model folder, or (a judge served
# over HTTP, no local model) the server and the model it serves.
SERVER = {"base_url": "http://127.0.0.1:8000/v1", "served_model": "judge"}


def needs(name: str, path: str = "/m") -> dict:
    """The least settings a judge of backend ``name`` takes."""
    return dict(SERVER) if name == "server" else {"path": path}


def names_a_backend(path: Path, package: Path = PACKAGE) -> list[str]:
    """Where a module of ``package`` spells a backend's name (a backend's own module may
    name itself), or tests whether a ``backend`` equals or is in something."""
    found, relative = [], path.relative_to(package.parent).as_posix()
    module = relative.removesuffix(".py").replace("/", ".")
    allowed = ({r.name for r in BACKENDS.values() if r.factory.partition(":")[0] == module}
               | {name for where, name in NOT_A_BACKEND if where == relative})
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (isinstance(node, ast.Constant) and node.value in BACKENDS
                and node.value not in allowed):
            found.append(f"{relative}:{node.lineno} names the backend {node.value!r}")
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            on_backend = any(isinstance(s, ast.Attribute) and s.attr == "backend"
                             or isinstance(s, ast.Name) and s.id == "backend" for s in sides)
            by_name = any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn))
                          for op in node.ops)
            if on_backend and by_name:
                found.append(f"{relative}:{node.lineno} compares a backend with a name")
    return found


def test_no_module_outside_the_registry_names_a_backend():
    found = [line for path in sorted(PACKAGE.rglob("*.py")) if path != REGISTRY
             for line in names_a_backend(path)]
    assert not found, ("read the backend's record (evaluator.judges.backends.registry) "
                       "instead:\n" + "\n".join(found))


def test_the_check_finds_what_the_registry_replaced(tmp_path):
    # Lines as they were before the registry (models_file.py, doctor/cuda.py,
    # doctor/memory.py, judges/backends/__init__.py), and one from elsewhere.
    module = tmp_path / "evaluator" / "doctor" / "example.py"
    module.parent.mkdir(parents=True)
    module.write_text('backend: Literal["transformers", "tiny-random", "fake", "vllm"]\n'
                      'BACKENDS = {"fake": "evaluator.judges.backends.fake:FakeBackend"}\n'
                      'if spec.backend != VLLM:\n    pass\n'
                      'uses = self.backend in ("transformers", "tiny-random", "vllm")\n'
                      'if requirement.name == "vllm":\n    pass\n')
    found = sorted(names_a_backend(module, tmp_path / "evaluator"))
    assert found == sorted(["evaluator/doctor/example.py:1 names the backend 'transformers'",
                            "evaluator/doctor/example.py:1 names the backend 'tiny-random'",
                            "evaluator/doctor/example.py:1 names the backend 'fake'",
                            "evaluator/doctor/example.py:1 names the backend 'vllm'",
                            "evaluator/doctor/example.py:2 names the backend 'fake'",
                            "evaluator/doctor/example.py:3 compares a backend with a name",
                            "evaluator/doctor/example.py:5 names the backend 'transformers'",
                            "evaluator/doctor/example.py:5 names the backend 'tiny-random'",
                            "evaluator/doctor/example.py:5 names the backend 'vllm'",
                            "evaluator/doctor/example.py:5 compares a backend with a name",
                            "evaluator/doctor/example.py:6 names the backend 'vllm'"])


def test_records_name_modules_that_define_their_factories():
    for record in BACKENDS.values():
        module, _, attribute = record.factory.partition(":")
        path = PACKAGE.parent / (module.replace(".", "/") + ".py")
        scope: list[ast.stmt] = ast.parse(path.read_text(encoding="utf-8")).body
        for part in attribute.split("."):
            defined = {node.name: node for node in scope if isinstance(
                node, (ast.ClassDef, ast.FunctionDef))}
            assert part in defined, f"{record.name}: {module} defines no {attribute}"
            scope = getattr(defined[part], "body", [])


def test_the_registry_imports_no_backend_module():
    # Validating every kind of judge imports none of the backends' modules (nor torch/vllm):
    # they load only when a judge does.
    modules = sorted({r.factory.partition(":")[0] for r in BACKENDS.values()})
    code = ("import json, sys, evaluator, evaluator.doctor.diagnose, evaluator.run.manifest\n"
            "from evaluator.judges.models_file import JudgeSpec\n"
            "for name, settings in json.loads(sys.argv[1]).items():\n"
            "    JudgeSpec(backend=name, **settings)\n"
            f"loaded = [m for m in {modules + ['torch', 'vllm']!r} if m in sys.modules]\n"
            "print(loaded); sys.exit(1 if loaded else 0)")
    done = subprocess.run([sys.executable, "-c", code,
                           json.dumps({name: needs(name) for name in BACKENDS})],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_models_file_accepts_exactly_the_registrys_backends(tmp_path):
    assert typing.get_args(JudgeSpec.model_fields["backend"].annotation) == tuple(BACKENDS)
    path = tmp_path / "models.yaml"
    for name in BACKENDS:
        path.write_text(yaml.safe_dump({"default": "j", "judges": {
            "j": {"backend": name, **needs(name, str(tmp_path))}}}))
        assert load_models_file(path).judges["j"].backend == name
    path.write_text(yaml.safe_dump({"default": "j", "judges": {
        "j": {"backend": "llama_cpp", "path": str(tmp_path)}}}))
    with pytest.raises(JudgeConfigError) as caught:
        load_models_file(path)
    # Byte for byte the message from before the registry.
    assert str(caught.value) == (f"{path}: invalid models file: judges.j.backend: Input "
                                 "should be 'transformers', 'tiny-random', 'fake', 'vllm' or "
                                 "'server'")


def test_an_unknown_backend_at_load_lists_the_registrys_names():
    with pytest.raises(BackendUnavailable) as caught:
        load_backend("j", JudgeSpec.model_construct(backend="llama_cpp"))
    assert str(caught.value) == ("backend 'llama_cpp' is not available in this version; "
                                 "known backends: fake, server, tiny-random, transformers, "
                                 "vllm")


@pytest.mark.parametrize("name", list(BACKENDS))
def test_models_file_validation_follows_each_record(name):
    record = BACKENDS[name]

    def accepts(**settings) -> bool:
        try:
            JudgeSpec(**{"backend": name, **needs(name), **settings})
        except ValueError:
            return False
        return True

    assert accepts(stream=True) == record.streams
    if record.model or record.settings == BACKENDS["transformers"].settings:
        assert accepts(fill_threads=2) == accepts(device="mps") == (not record.vllm_engine)
    else:  # a judge served over HTTP: its device and its constraint are its server's
        assert not accepts(fill_threads=2) and not accepts(device="mps")
        assert not accepts(path="/m")
    assert accepts() and (record.weights != "path" or not accepts(path=None))


@pytest.mark.parametrize("name", list(BACKENDS))
def test_each_record_names_its_own_strict_settings_model(name):
    # A judge is built as, and validated by, the model its backend's record names.
    model = BACKENDS[name].settings_model()
    assert issubclass(model, JudgeSpec) and model is not JudgeSpec
    assert model.model_config["extra"] == "forbid"
    spec = JudgeSpec(backend=name, **needs(name))
    assert type(spec) is model and type(JudgeSpec.model_validate(spec.model_dump())) is model
    other = next(r.settings_model() for r in BACKENDS.values()
                 if r.settings_model() is not model)
    with pytest.raises(ValueError, match="settings are"):  # another backend's model
        other(backend=name, **{key: value for key, value in needs(name).items()
                               if key in other.model_fields})


def test_a_judge_is_checked_by_its_own_backends_settings_alone(tmp_path):
    # An engine: block is a vLLM judge's: for another judge it is refused as not its
    # backend's, not checked as vLLM settings; each error is one line naming the key.
    path = tmp_path / "models.yaml"
    for judge, message in [
        ({"backend": "transformers", "path": "m", "engine": {"tensor_parallel_size": 2}},
         ("judges.j: engine holds vLLM's engine settings; this backend runs no "
          "vLLM engine: remove 'engine' from this judge")),
        ({"backend": "vllm", "path": "m", "engine": {"tensor_paralel_size": 2}},
         ("judges.j: engine: unknown vLLM setting 'tensor_paralel_size' (did "
          "you mean 'tensor_parallel_size'?)")),
        ({"backend": "vllm", "path": "m", "fill_threads": 2},
         ("judges.j: fill_threads sets the transformers backend's mask fill; "
          "vLLM fills its own: remove 'fill_threads' from this judge")),
        ({"backend": "fake", "sampling": {"temprature": 1}},
         "judges.j.sampling.temprature: Extra inputs are not permitted"),
    ]:
        path.write_text(yaml.safe_dump({"default": "j", "judges": {"j": judge}}))
        with pytest.raises(JudgeConfigError) as caught:
            load_models_file(path)
        assert "\n" not in str(caught.value)
        assert str(caught.value).startswith(f"{path}: invalid models file: {message}")
