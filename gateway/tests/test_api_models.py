"""The API's request and response models are in one place, gateway/models.py.

Held against the OpenAPI document the app serves: every schema in it that is a model of the
gateway package is defined in ``gateway.models`` (models of ``contracts`` appear too, as the
types of fields), and no two models share a name (FastAPI would then name their schemas after
their modules, ``gateway__analytics__DocumentRead``).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections import defaultdict

from pydantic import BaseModel

import gateway
from gateway.app import create_app
from gateway.config import GatewaySettings


def gateway_models() -> dict[str, set[str]]:
    """Name -> modules of the gateway package (not its tests) that define a model so named."""
    defined: dict[str, set[str]] = defaultdict(set)
    for module_info in pkgutil.walk_packages(gateway.__path__, "gateway."):
        name = module_info.name
        if name.startswith("gateway.tests") or name.endswith("__main__"):
            continue
        module = importlib.import_module(name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseModel) and value.__module__ == name:
                defined[value.__name__].add(name)
    return defined


def test_every_api_model_of_the_gateway_is_in_gateway_models() -> None:
    schemas = create_app(GatewaySettings(admin_token="t" * 40)).openapi()["components"]["schemas"]
    clashing = sorted(name for name in schemas if "__" in name)
    assert clashing == [], "two API models share a name"
    defined = gateway_models()
    in_the_api = {name: defined[name] for name in schemas if name in defined}
    elsewhere = {
        name: sorted(modules)
        for name, modules in in_the_api.items()
        if modules != {"gateway.models"}
    }
    assert elsewhere == {}, "move these API models to gateway/models.py"
    assert len(in_the_api) >= 30, "the API's models were not found: has the check broken?"
