"""Deterministic identities and random streams, all derived from the seed.

Each part of the simulation draws from its own stream (`stream(seed, "fleet", "alpha")`), so that
adding draws to one part (say, DCGM noise) never changes another (the job schedule).
"""

from __future__ import annotations

import hashlib
import zlib

import numpy as np


def stream(seed: int, *names: str) -> np.random.Generator:
    """An independent generator for one named part of the simulation."""
    return np.random.default_rng([int(seed), *(zlib.crc32(name.encode()) for name in names)])


def _hex(*parts: object) -> str:
    return hashlib.sha256("/".join(str(part) for part in parts).encode()).hexdigest()


def gpu_uuid(seed: int, node: str, index: int) -> str:
    """`GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, stable for (seed, node, index)."""
    h = _hex("gpu", seed, node, index)
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def probe_run_id(seed: int, node: str, started_at: str) -> str:
    return f"sim-{_hex('probe', seed, node, started_at)[:16]}"
