"""What ``anchor serve --ray`` is told, checked before Ray is started (no Ray import here): where Ray runs,
how many online replicas (fixed, or autoscaled), and how the one ``--concurrency`` budget is split among
them and the jobs replica."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from anchor.errors import ConfigurationError
from anchor.serve.settings import ServeSettings

#: ``HOST:PORT`` of a running cluster's head (what ``ray start --head`` prints), or the client's ``ray://``.
ADDRESS = re.compile(r"(ray://)?[A-Za-z0-9.\-\[\]:]+:\d{1,5}")
ADDRESS_HINT = "give 'local' (a Ray instance started here), 'auto' (the one `ray start` began on this machine), " \
               "HOST:PORT of a cluster's head, or ray://HOST:PORT"


class RayScaling(BaseModel):
    """Ray Serve's autoscaling of the online replicas (a subset of its ``autoscaling_config``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_replicas: int = Field(ge=1)
    max_replicas: int = Field(ge=1)
    target_ongoing_requests: float = Field(default=32.0, gt=0, description=(
        "Requests in progress a replica should have; Ray adds replicas above it. Ours are mostly held open "
        "waiting on the LLM, so the figure is far above Ray's default of 2."))

    @model_validator(mode="after")
    def _ordered(self) -> RayScaling:
        if self.max_replicas < self.min_replicas:
            raise ValueError(f"max_replicas {self.max_replicas} is below min_replicas {self.min_replicas}")
        return self

    def ray_config(self) -> dict[str, float | int]:
        return self.model_dump()


class RayServeOptions(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    address: str
    replicas: int = Field(default=1, ge=1, description="Online replicas (without autoscaling).")
    autoscale: RayScaling | None = None

    @property
    def max_replicas(self) -> int:
        return self.autoscale.max_replicas if self.autoscale is not None else self.replicas


def parse_address(value: str) -> str:
    """``--ray``'s value, or one line naming ``--ray``."""
    value = value.strip()
    if value in ("local", "auto") or ADDRESS.fullmatch(value):
        return value
    raise ConfigurationError(f"--ray {value[:80]!r}: not an address; {ADDRESS_HINT}")


def parse_autoscale(value: str) -> RayScaling:
    """``--ray-autoscale MIN,MAX[,TARGET]``, or one line naming the flag."""
    parts = [p.strip() for p in value.split(",")]
    shape = "MIN,MAX[,TARGET]: replicas at least MIN, at most MAX, and TARGET requests in progress a replica"

    def refuse(why: str) -> ConfigurationError:
        return ConfigurationError(f"--ray-autoscale {value[:40]!r}: {why} ({shape})")

    if len(parts) not in (2, 3):
        raise refuse(f"{len(parts)} value(s)")
    try:
        numbers: list[float] = [int(parts[0]), int(parts[1])] + ([float(parts[2])] if len(parts) == 3 else [])
    except ValueError:
        raise refuse("MIN and MAX are whole numbers, TARGET a number") from None
    try:
        return RayScaling(**dict(zip(("min_replicas", "max_replicas", "target_ongoing_requests"), numbers,
                                     strict=False)))  # type: ignore[arg-type]
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(x) for x in error.get("loc", ()))
        raise refuse(f"{where + ': ' if where else ''}{error['msg'].removeprefix('Value error, ')}") from None


def ray_options(address: str | None, replicas: int | None, autoscale: str | None) -> RayServeOptions | None:
    """The ``--ray`` flags together: None without ``--ray`` (then neither of the others may be given)."""
    if address is None:
        for flag, given in (("--replicas", replicas), ("--ray-autoscale", autoscale)):
            if given is not None:
                raise ConfigurationError(f"{flag} needs --ray (replicas are Ray Serve's)")
        return None
    if replicas is not None and autoscale is not None:
        raise ConfigurationError("--replicas and --ray-autoscale: give one (a fixed number, or the autoscaling "
                                 "bounds)")
    if replicas is not None and replicas < 1:
        raise ConfigurationError(f"--replicas {replicas}: give at least 1")
    return RayServeOptions(address=parse_address(address), replicas=replicas or 1,
                           autoscale=parse_autoscale(autoscale) if autoscale is not None else None)


class BudgetSplit(BaseModel):
    """The one LLM budget (``--concurrency``) cut into fixed shares: one for the jobs replica (its batch
    share) and an equal one for each online replica at the most replicas there may be, so the requests
    in flight across the deployment never exceed ``--concurrency``."""

    model_config = ConfigDict(frozen=True)

    total: int
    jobs: int
    online_each: int
    replicas: int

    @classmethod
    def of(cls, concurrency: int, batch_share: float, replicas: int) -> BudgetSplit:
        jobs = max(1, int(concurrency * batch_share))
        each = (concurrency - jobs) // replicas
        if each < 1:
            raise ConfigurationError(
                f"--concurrency {concurrency}: too small to share among {replicas} online replica(s) and the jobs "
                f"replica ({jobs} for jobs by --batch-share, and at least 1 a replica); give at least "
                f"{jobs + replicas}")
        return cls(total=concurrency, jobs=jobs, online_each=each, replicas=replicas)


def ready_line(options: RayServeOptions, split: BudgetSplit, settings: ServeSettings) -> str:
    """What ``anchor serve --ray`` prints once every replica has started."""
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    replicas = (f"{options.autoscale.min_replicas} to {options.autoscale.max_replicas} online replicas"
                if options.autoscale else f"{options.replicas} online replica(s)")
    return (f"anchor serve: listening at http://{host}:{settings.port} (Ray Serve at {options.address}: {replicas} "
            f"and 1 for jobs; LLM budget {split.total}: {split.online_each} a replica, {split.jobs} for jobs; "
            f"state {settings.state}, store {settings.store_dir})")
