"""GET /api/v1/health and /api/v1/model: is it up, and what is it serving."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from serve.deps import ServiceDep
from serve.schemas import Health, ModelInfo

router = APIRouter(tags=["info"])
RESTART_RETRY_AFTER = "5"  # seconds: about what restarting the decode workers takes


@router.get(
    "/health",
    response_model=Health,
    responses={503: {"model": Health, "description": "degraded: a decode worker died and is being replaced"}},
)
def health(service: ServiceDep, response: Response) -> Health:
    """``ok`` (200), or ``degraded`` (503, for a readiness or liveness probe) while fewer decode
    workers run than configured: from a worker's death until its replacements have started."""
    alive, wanted = service.workers()
    healthy = service.healthy()
    if not healthy:
        response.status_code = status.HTTP_503_SERVICE_UNAVAILABLE
        response.headers["Retry-After"] = RESTART_RETRY_AFTER
    return Health(
        status="ok" if healthy else "degraded",
        model_version=service.model.version,
        known_lines=len(service.known) if service.known is not None else 0,
        decode_workers=alive,
        decode_workers_wanted=wanted,
    )


@router.get("/model", response_model=ModelInfo)
def model_info(service: ServiceDep) -> ModelInfo:
    """Version, configuration, model and data cards, evaluation figures of the serving model."""
    return ModelInfo(**service.info())
