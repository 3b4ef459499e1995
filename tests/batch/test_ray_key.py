"""A batch's API key and Ray: kept out of Ray's object store where the workers can read it.

``ra batch --backend ray`` without ``--address`` starts Ray on this machine; its workers are this
process's descendants and inherit its environment. A key that came from an environment variable
then travels as that variable's name only, and each worker reads it again. A cluster's workers
(``--address``) cannot: there the key is in the recipe, as documented.
"""

from __future__ import annotations

import pickle
from types import SimpleNamespace

import pytest

from ra.cli.batch_command import ClientRecipe, recipe_for
from ra.cli.errors import RunError

KEY = "sk-batch-key-0123456789abcdef"


def settings(provider: str = "openai", key: str | None = KEY) -> SimpleNamespace:
    return SimpleNamespace(provider=provider, base_url=None, api_key=key, temperature=None, top_p=None, max_tokens=None)


def test_a_local_ray_gets_the_variables_name_not_the_key() -> None:
    recipe = recipe_for(settings(), {"OPENAI_API_KEY": KEY}, backend="ray", address=None)
    assert recipe.api_key is None and recipe.key_env == "OPENAI_API_KEY"
    assert KEY.encode() not in pickle.dumps(recipe)  # what Ray would carry


def test_each_providers_own_variable_is_named() -> None:
    environ = {"ANTHROPIC_API_KEY": KEY, "OPENAI_API_KEY": "another"}
    recipe = recipe_for(settings("anthropic"), environ, backend="ray", address=None)
    assert recipe.key_env == "ANTHROPIC_API_KEY"


@pytest.mark.parametrize(
    ("environ", "backend", "address"),
    [
        ({"OPENAI_API_KEY": KEY}, "ray", "ray://cluster:10001"),  # a cluster's workers lack this environment
        ({"OPENAI_API_KEY": KEY}, "local", None),  # nothing is pickled
        ({}, "ray", None),  # the key came from the config file: no variable holds it
        ({"OPENAI_API_KEY": "a different key"}, "ray", None),
    ],
)
def test_otherwise_the_key_travels_in_the_recipe(environ: dict[str, str], backend: str, address: str | None) -> None:
    recipe = recipe_for(settings(), environ, backend=backend, address=address)
    assert recipe.api_key == KEY and recipe.key_env is None


def test_the_worker_reads_the_key_from_its_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    recipe = ClientRecipe("openai", None, None, key_env="OPENAI_API_KEY")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    client = recipe(None)
    assert [adapter.api_key for adapter in client.providers.values()] == [KEY]
    assert KEY not in repr(recipe)


def test_a_worker_without_the_variable_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    recipe = ClientRecipe("openai", None, None, key_env="OPENAI_API_KEY")
    with pytest.raises(RunError, match="OPENAI_API_KEY is not set where the task runs"):
        recipe(None)
