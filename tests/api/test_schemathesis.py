"""Hostile input from the OpenAPI description of the live gateway (real HTTP, uvicorn on a
free port): every operation, valid and invalid data, no 5xx, every response in its
declared status codes and schema. Deterministic (`derandomize`) and bounded, so it runs
in about a minute of CPU. Tenant routes run with a tenant's key; the operator routes
(`/v1/admin/...`, which answer a tenant's key 403 before reading anything) run again with an
operator key, against a second gateway over the same store. The MCP tools, which are not
in the OpenAPI description, have their own property test (tests/integrations/
test_mcp_properties.py).

schemathesis' pytest plugin does not run under pytest 9 (it reads a private node
attribute), so each operation's case strategy runs under hypothesis directly.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from conftest import KEY_A
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from live_gateway import gateway, settings_with
from pydantic import SecretStr
from schemathesis.specs.openapi.checks import positive_data_acceptance

from memoryd.records.schemas import ErrorBody

EXAMPLES = {schemathesis.GenerationMode.POSITIVE: 30, schemathesis.GenerationMode.NEGATIVE: 20}


def operations(base_url: str) -> list[Any]:
    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json")
    return [result.ok() for result in schema.get_all_operations()]


OPERATOR_KEY = "test-schemathesis-operator"


def run_operation(operation: Any, mode: schemathesis.GenerationMode, calls: list[int],
                  key: str = KEY_A) -> None:
    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES[mode], derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    def check(case: schemathesis.Case) -> None:
        # Cross-field rules (a project scope needs a project, a patch needs one field, text
        # must not be blank) are not in the JSON schema, so schema-valid data may get a 422:
        # the check that expects 2xx for it is off; every other default check runs.
        response = case.call_and_validate(headers={"Authorization": f"Bearer {key}"},
                                          excluded_checks=[positive_data_acceptance])
        calls.append(response.status_code)
        if response.status_code >= 400:
            # Every refusal is the one error shape, with a stable code.
            ErrorBody.model_validate(response.json())

    check()


def run_all(ops: list[Any], mode: schemathesis.GenerationMode, key: str = KEY_A) -> list[int]:
    failures = []
    calls: list[int] = []
    for operation in ops:
        try:
            run_operation(operation, mode, calls, key)
        except Unsatisfiable:
            # Nothing in this operation can be made invalid (a free-form path string, no
            # parameters): only the positive run applies.
            assert mode is schemathesis.GenerationMode.NEGATIVE, operation.label
        except Exception as exc:  # collect all, so one run shows every failing operation
            failures.append(f"{operation.label}: {exc}")
    assert not failures, "\n\n".join(failures)
    return calls


@pytest.mark.parametrize("mode", list(EXAMPLES), ids=[m.value for m in EXAMPLES])
def test_every_operation(base_url: str, mode: schemathesis.GenerationMode) -> None:
    ops = operations(base_url)
    assert len(ops) >= 25  # the schema really was read: every route of the gateway
    calls = run_all(ops, mode)
    assert len(calls) >= 5 * len(ops)


@pytest.mark.parametrize("mode", list(EXAMPLES), ids=[m.value for m in EXAMPLES])
def test_operator_operations(stack: Any, mode: schemathesis.GenerationMode) -> None:
    settings = settings_with(stack, operator_keys=SecretStr(OPERATOR_KEY))
    with gateway(settings, stack.runtime.index) as url:
        admin = [op for op in operations(url) if op.path.startswith("/v1/admin/")]
        assert len(admin) >= 3
        calls = run_all(admin, mode, OPERATOR_KEY)
    # The operator key was taken: not every call was refused for the key.
    assert any(code not in (401, 403) for code in calls), calls

