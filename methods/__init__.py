"""One file per method. Importing this package registers them all (methods.base.REGISTRY)."""
from methods.base import REGISTRY, Method, MethodConfig, get_method, register  # noqa: F401
from methods import sft  # noqa: F401  (registration order = the order --list-methods prints)
from methods import rft  # noqa: F401
from methods import online_rft  # noqa: F401
from methods import ppo  # noqa: F401
from methods import grpo  # noqa: F401
from methods import grpo_ps  # noqa: F401
from methods import dpo  # noqa: F401
from methods import rloo  # noqa: F401

__all__ = ["REGISTRY", "Method", "MethodConfig", "get_method", "register"]
