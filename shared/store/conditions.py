"""A small, backend-neutral filter language; each store adapter translates it once."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

Scalar = str | int | bool
Bound = datetime | float | None


@dataclass(frozen=True)
class Match:
    key: str
    value: Scalar


@dataclass(frozen=True)
class AnyOf:
    key: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Between:
    key: str
    gte: Bound = None
    lte: Bound = None
    gt: Bound = None
    lt: Bound = None


@dataclass(frozen=True)
class IdIn:
    ids: tuple[str, ...]


@dataclass(frozen=True)
class AllOf:
    conditions: tuple[Condition, ...]


@dataclass(frozen=True)
class OneOf:
    conditions: tuple[Condition, ...]


@dataclass(frozen=True)
class NoneOf:
    conditions: tuple[Condition, ...]


Condition = Match | AnyOf | Between | IdIn | AllOf | OneOf | NoneOf


def iso(value: Bound) -> str | None:
    return value.isoformat() if isinstance(value, datetime) else None


def is_datetime_range(cond: Between) -> bool:
    return any(isinstance(v, datetime) for v in (cond.gte, cond.lte, cond.gt, cond.lt))


def as_float(value: Bound) -> float | None:
    return None if value is None or isinstance(value, datetime) else float(value)
