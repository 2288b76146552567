"""Reading a Hugging Face ``config.json`` the way vLLM 0.33.0 sees it.

vLLM reads the file through a transformers config class, whose defaults fill the keys a file
leaves out; each architecture module states the defaults it relies on (with the transformers
5.20.2 source). A key vLLM needs that is missing or of the wrong type is a :class:`ConfigError`
naming the key, never a ``KeyError``.
"""

from __future__ import annotations

from typing import Any

from ..diagnostics import Diagnostic, InputError

__all__ = [
    "CONFIG_FIELD", "CONFIG_ARCH", "CONFIG_PARALLEL", "VLLM_REFUSAL", "ConfigError", "HFConfig",
    "MODEL_DTYPES", "parse_config",
]

#: A key the architecture needs is missing or has the wrong type.
CONFIG_FIELD = "HF001"
#: The architecture is not in kvproof's table (or vLLM 0.33.0 no longer supports it).
CONFIG_ARCH = "HF002"
#: vLLM 0.33.0 refuses the tensor- or pipeline-parallel size for this model.
CONFIG_PARALLEL = "HF003"
#: vLLM itself refuses (its exact text).
VLLM_REFUSAL = "HF003"

#: ``torch_dtype`` / ``dtype`` names -> the geometry's dtype names (vllm/config/model.py
#: ``_STR_DTYPE_TO_TORCH_DTYPE``).
MODEL_DTYPES = {"bfloat16": "bfloat16", "float16": "float16", "half": "float16", "float32": "float32",
                "float": "float32"}


def parse_config(data: bytes, file: str | None = None) -> Any:
    """The JSON tree of a ``config.json``. kvproof's strict reader, except that the non-finite
    numbers Python's ``json`` (and so transformers) reads are taken as they are: real configs hold
    them (Nemotron-H's ``time_step_limit: [0.0, Infinity]``) in keys no cache spec reads."""
    import json

    from ..models.codec import parse_json

    try:
        return parse_json(data, file)
    except InputError as error:
        if not all("non-finite number" in diagnostic.message for diagnostic in error.diagnostics):
            raise
    return json.loads(data.decode("utf-8"))


class ConfigError(InputError):
    """A config vLLM cannot build the model from: one diagnostic at the config key's path."""

    def __init__(self, rule: str, path: str, message: str, file: str | None = None):
        super().__init__([Diagnostic(rule, path, message, file)])


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a bool"
    return {int: "an integer", float: "a number", str: "a string", list: "an array", dict: "an object"}.get(
        type(value), type(value).__name__)


class HFConfig:
    """The parsed ``config.json`` (``text_config`` is the language model's part when present,
    vLLM's ``hf_text_config``), with typed access that names the key on failure."""

    def __init__(self, tree: Any, file: str | None = None, path: str = "$"):
        if not isinstance(tree, dict):
            raise ConfigError(CONFIG_FIELD, path, f"expected a JSON object, got {_describe(tree)}", file)
        self.tree = tree
        self.file = file
        self.path = path

    def key_path(self, key: str) -> str:
        return f"{self.path}.{key}"

    def text(self) -> "HFConfig":
        """The language model's part: ``text_config`` when the file has one (vLLM's
        ``hf_text_config``, multimodal wrappers such as Llama 4), else the file itself."""
        if self.tree.get("text_config") is None:
            return self
        return HFConfig(self.tree["text_config"], self.file, self.key_path("text_config"))

    def has(self, key: str) -> bool:
        return self.tree.get(key) is not None

    def raw(self, key: str, default: Any = None) -> Any:
        value = self.tree.get(key)
        return default if value is None else value

    def _fail(self, key: str, message: str):
        raise ConfigError(CONFIG_FIELD, self.key_path(key), message, self.file)

    def int(self, key: str, default: Any = ..., *, minimum: int = 0) -> int:
        """A non-negative (or ``>= minimum``) integer; ``default`` when absent or null (vLLM reads
        the config class's attribute, which is null-safe only where the class has a default)."""
        value = self.tree.get(key)
        if value is None:
            if default is ...:
                self._fail(key, f"required key is missing (vLLM 0.33.0 reads config.{key})")
            return default
        if type(value) is not int:
            self._fail(key, f"expected an integer, got {_describe(value)}")
        if value < minimum:
            self._fail(key, f"expected an integer of at least {minimum}, got {value}")
        return value

    def str(self, key: str, default: Any = ...) -> str:
        value = self.tree.get(key)
        if value is None:
            if default is ...:
                self._fail(key, f"required key is missing (vLLM 0.33.0 reads config.{key})")
            return default
        if type(value) is not str:
            self._fail(key, f"expected a string, got {_describe(value)}")
        return value

    def str_list(self, key: str, length: int) -> list[str] | None:
        value = self.tree.get(key)
        if value is None:
            return None
        if type(value) is not list or not all(type(item) is str for item in value):
            self._fail(key, "expected an array of strings")
        if len(value) < length:
            self._fail(key, f"expected at least {length} entries (one per layer), got {len(value)}")
        return value

    def architecture(self) -> str:
        value = self.tree.get("architectures")
        if value is None:
            self._fail("architectures", "required key is missing (vLLM 0.33.0 picks the model class by it)")
        if type(value) is not list or not value or not all(type(item) is str for item in value):
            self._fail("architectures", "expected a non-empty array of architecture names")
        return value[0]

    def model_dtype(self) -> str:
        """``ModelConfig.dtype`` for ``--dtype auto`` on the default platform (CUDA, compute
        capability 9.0): the config's ``dtype`` (``torch_dtype`` in older files), else its
        ``text_config``'s (``get_torch_dtype``, transformers_utils/model_arch_config_convertor.py:
        201-215); float32 models run in the platform's first supported dtype, bfloat16
        (vllm/config/model.py:2423-2446, platforms/cuda.py:257-260); absent is float32."""
        source = self
        if not (self.has("dtype") or self.has("torch_dtype")) and self.text() is not self:
            source = self.text()
        key = "dtype" if source.has("dtype") else "torch_dtype"
        name = source.raw(key, "float32")
        if type(name) is not str or name not in MODEL_DTYPES:
            source._fail(key, f"expected one of {', '.join(sorted(MODEL_DTYPES))}, got {name!r}")
        dtype = MODEL_DTYPES[name]
        return "bfloat16" if dtype == "float32" else dtype
