"""How provider requests travel: `iface` (what providers and the transport agree on), `reply`
(a body under its cap, its JSON), `limiter` (the request budget), `gate` (the one check each
attempt passes as it is written), `http` (the aiohttp session) and `limited` (the client every
provider gets: gate, retries, timeouts, metrics and logs)."""
