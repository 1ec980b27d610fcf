"""How many different contents a stream holds, in bounded memory: exact (a set of 64-bit hash
prefixes) up to ``exact_cap`` distinct values, then a HyperLogLog sketch (2**12 registers, about
1.6 % standard error) that was fed all along. Counters merge: sets by union while the union stays
under the cap, sketches by taking each register's maximum, so shards can count apart."""
from __future__ import annotations

import base64
import math
import zlib
from dataclasses import dataclass, field

from pydantic import BaseModel

PRECISION = 12  # HyperLogLog: 2**12 registers of one byte
REGISTERS = 1 << PRECISION
EXACT_CAP = 200_000  # distinct hashes kept exactly (a Python int in a set: ~70 bytes each)


class DistinctCount(BaseModel):
    """A count of distinct values and how it was made: ``exact``, or ``hyperloglog`` (an estimate)."""

    distinct: int
    method: str


@dataclass
class DistinctCounter:
    exact_cap: int = EXACT_CAP
    exact: set[int] | None = field(default_factory=set)  # None once past the cap
    registers: bytearray = field(default_factory=lambda: bytearray(REGISTERS))

    def add(self, hex_digest: str) -> None:
        """Count a content hash (hex; its first 16 digits are used)."""
        value = int(hex_digest[:16], 16)
        if self.exact is not None:
            self.exact.add(value)
            if len(self.exact) > self.exact_cap:
                self.exact = None
        index = value >> (64 - PRECISION)
        rest = value & ((1 << (64 - PRECISION)) - 1)
        rank = (64 - PRECISION) - rest.bit_length() + 1
        if rank > self.registers[index]:
            self.registers[index] = rank

    def count(self) -> DistinctCount:
        if self.exact is not None:
            return DistinctCount(distinct=len(self.exact), method="exact")
        return DistinctCount(distinct=round(_hyperloglog(self.registers)), method="hyperloglog")

    def merge(self, other: "DistinctCounter") -> "DistinctCounter":
        exact = None
        if self.exact is not None and other.exact is not None:
            exact = self.exact | other.exact
            if len(exact) > self.exact_cap:
                exact = None
        registers = bytearray(max(a, b) for a, b in zip(self.registers, other.registers))
        return DistinctCounter(self.exact_cap, exact, registers)

    def to_json(self) -> dict:
        exact = None if self.exact is None else [format(value, "016x") for value in sorted(self.exact)]
        return {"exact": exact, "registers": base64.b64encode(zlib.compress(bytes(self.registers))).decode("ascii")}

    @classmethod
    def from_json(cls, raw: dict, exact_cap: int = EXACT_CAP) -> "DistinctCounter":
        exact = None if raw.get("exact") is None else {int(value, 16) for value in raw["exact"]}
        registers = bytearray(zlib.decompress(base64.b64decode(raw["registers"])))
        return cls(exact_cap, exact, registers)


def _hyperloglog(registers: bytearray) -> float:
    """Flajolet et al.'s estimate, with linear counting for small cardinalities."""
    m = len(registers)
    alpha = 0.7213 / (1 + 1.079 / m)
    raw = alpha * m * m / sum(2.0 ** -rank for rank in registers)
    zeros = registers.count(0)
    if raw <= 2.5 * m and zeros:
        return m * math.log(m / zeros)
    return raw

