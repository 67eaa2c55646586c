"""The credentials that passed a bcrypt check, least recently used first out.

Only successes are kept (exporter-toolkit's cache.go keeps every outcome): a guess can then
never push a working scraper out. With outcomes cached, 100 wrong guesses evicted the real
credentials, whose next scrape waited behind the guessers' bcrypt queue: 15.1 s at 250
connections, past Prometheus' default 10 s scrape timeout. Keys are HMACs made by the caller,
never passwords.
"""

from __future__ import annotations

from collections import OrderedDict

DEFAULT_SIZE = 100


class SuccessCache:
    def __init__(self, size: int = DEFAULT_SIZE) -> None:
        self.size = size
        self._keys: OrderedDict[bytes, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._keys)

    def hit(self, key: bytes) -> bool:
        if key not in self._keys:
            return False
        self._keys.move_to_end(key)
        return True

    def add(self, key: bytes) -> None:
        self._keys[key] = None
        self._keys.move_to_end(key)
        while len(self._keys) > self.size:
            self._keys.popitem(last=False)
