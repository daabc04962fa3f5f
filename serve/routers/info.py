"""GET /api/v1/health and /api/v1/model: is it up, and what is it serving."""

from __future__ import annotations

from fastapi import APIRouter

from serve.deps import ServiceDep
from serve.schemas import Health, ModelInfo

router = APIRouter(tags=["info"])


@router.get("/health", response_model=Health)
def health(service: ServiceDep) -> Health:
    return Health(
        status="ok",
        model_version=service.model.version,
        known_lines=len(service.known) if service.known is not None else 0,
    )


@router.get("/model", response_model=ModelInfo)
def model_info(service: ServiceDep) -> ModelInfo:
    """Version, configuration, model and data cards, evaluation figures of the serving model."""
    return ModelInfo(**service.info())
