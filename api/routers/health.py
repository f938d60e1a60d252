"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from memoryd.api.deps import RuntimeDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"description": "Redis or the store is unreachable"}})
def readyz(rt: RuntimeDep) -> JSONResponse:
    checks: dict[str, str] = {}
    try:
        rt.redis.ping()
        checks["redis"] = "ok"
    except Exception as exc:  # any failure means not ready; say which
        checks["redis"] = f"unreachable: {type(exc).__name__}"
    try:
        rt.index.ping()
        checks["store"] = "ok"
    except Exception as exc:
        checks["store"] = f"unreachable: {type(exc).__name__}"
    ready = all(v == "ok" for v in checks.values())
    return JSONResponse(
        {"status": "ready" if ready else "unavailable", "checks": checks},
        status_code=200 if ready else 503,
    )
