"""The internal listeners of ``weed mini``: each one on a port we choose, so stacks coexist."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from poolq.devtools.devstack.ports import free_port, port_is_free
from poolq.devtools.devstack.process import ServiceError

#: weed's workers reach the admin gRPC server at admin HTTP port + this offset,
#: whatever -admin.port.grpc says (SeaweedFS 4.48), so we keep to that rule.
GRPC_PORT_OFFSET = 10000


@dataclass(frozen=True)
class SeaweedPorts:
    """The internal listeners of ``weed mini`` (S3 has its own config field)."""

    master: int
    master_grpc: int
    volume: int
    volume_grpc: int
    filer: int
    filer_grpc: int
    s3_grpc: int
    admin: int
    admin_grpc: int

    def __post_init__(self) -> None:
        if self.admin_grpc != self.admin + GRPC_PORT_OFFSET:
            raise ValueError(f"admin_grpc must be admin + {GRPC_PORT_OFFSET} (weed's workers assume it)")

    @classmethod
    def free(cls, exclude: Iterable[int] = ()) -> SeaweedPorts:
        """Pick distinct ports that are free on 127.0.0.1 now, none of them in ``exclude`` (the S3
        port, which the caller picked and released: the kernel may hand it out again)."""
        taken: set[int] = set(exclude)
        admin = pick_port(taken, grpc_offset=GRPC_PORT_OFFSET)
        return cls(
            master=pick_port(taken),
            master_grpc=pick_port(taken),
            volume=pick_port(taken),
            volume_grpc=pick_port(taken),
            filer=pick_port(taken),
            filer_grpc=pick_port(taken),
            s3_grpc=pick_port(taken),
            admin=admin,
            admin_grpc=admin + GRPC_PORT_OFFSET,
        )


def pick_port(taken: set[int], *, grpc_offset: int | None = None) -> int:
    """Return a free port not in ``taken`` and add it there.

    With ``grpc_offset``, port + offset must be free as well, and is added too.
    """
    for _ in range(200):
        port = free_port()
        wanted = [port] if grpc_offset is None else [port, port + grpc_offset]
        if wanted[-1] < 65536 and not taken.intersection(wanted) and all(map(port_is_free, wanted)):
            taken.update(wanted)
            return port
    raise ServiceError("could not find free ports on 127.0.0.1 for SeaweedFS")
