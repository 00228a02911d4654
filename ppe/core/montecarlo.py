"""Monte Carlo engine: aligned sample arrays over a shared sample space.

A :class:`Space` fixes the sample count ``n`` and the seed.  Every input (a
"leaf": a normal source, a mixture, a user's sample array) is drawn once per
space and cached, so every expression that uses the same input sees the same
draws and correlations come out exactly; arithmetic is element-wise on aligned
arrays.  Leaves are drawn from one generator in the order they are first met,
so a computation repeated with the same seed gives the same numbers.

:class:`Smp` holds ``m`` lanes of samples, shape ``(m, n)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

#: Default sample count and seed (reported with every Monte Carlo result).
DEFAULT_SAMPLES = 20_000
DEFAULT_SEED = 0


class Space:
    """A sample space: ``n`` aligned draws of every input, from ``seed``
    (numpy ``Generator(SFC64(seed))``)."""

    def __init__(self, n: int = DEFAULT_SAMPLES, seed: int = DEFAULT_SEED) -> None:
        if int(n) < 2:
            raise ValueError("a Monte Carlo space needs at least 2 samples")
        self.n = int(n)
        self.seed = int(seed)
        # SFC64: the fastest of numpy's bit generators; draws dominate MC time.
        self.rng = np.random.Generator(np.random.SFC64(self.seed))
        self._z: dict[int, FloatArray] = {}
        self._leaf: dict[int, FloatArray] = {}

    def z(self, source: int) -> FloatArray:
        """Standard-normal draws of one analytic source (cached)."""
        out = self._z.get(source)
        if out is None:
            out = self.rng.standard_normal(self.n)
            self._z[source] = out
        return out

    def z_block(self, sources: npt.NDArray[np.int64]) -> FloatArray:
        """``(len(sources), n)`` standard normals, drawing the missing ones in one go."""
        if len(sources) == 1:
            return self.z(int(sources[0]))[None, :]
        missing = [int(s) for s in sources if int(s) not in self._z]
        if missing:
            block = self.rng.standard_normal((len(missing), self.n))
            for s, row in zip(missing, block, strict=True):
                self._z[s] = row
        if len(sources) == 0:
            return np.zeros((0, self.n))
        return np.stack([self._z[int(s)] for s in sources])

    def leaf(self, uid: int, make: Callable[[np.random.Generator, int], FloatArray]) -> FloatArray:
        """Draws of a non-normal input, made once with ``make(rng, n)``."""
        out = self._leaf.get(uid)
        if out is None:
            out = np.asarray(make(self.rng, self.n), dtype=np.float64).reshape(self.n)
            self._leaf[uid] = out
        return out

    def adopt(self, samples: FloatArray) -> FloatArray:
        """Foreign samples as an independent input of this space: a random
        permutation (or a bootstrap when the size differs) breaks any alignment."""
        arr = np.asarray(samples, dtype=np.float64)
        if arr.shape[0] == self.n:
            return self.rng.permutation(arr)
        return self.rng.choice(arr, size=self.n, replace=True)

    def release(self) -> None:
        """Forget cached draws (results stay aligned; new inputs are fresh)."""
        self._z.clear()
        self._leaf.clear()


@dataclass(eq=False)
class Smp:
    """``m`` lanes of ``n`` aligned samples."""

    x: FloatArray
    space: Space

    @property
    def m(self) -> int:
        return int(self.x.shape[0])
