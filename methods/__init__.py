"""One file per method. Importing this package registers them all (methods.base.REGISTRY)."""
from methods.base import REGISTRY, Method, MethodConfig, get_method, register  # noqa: F401
from methods import sft  # noqa: F401  (registration order = the order --list-methods prints)

__all__ = ["REGISTRY", "Method", "MethodConfig", "get_method", "register"]
