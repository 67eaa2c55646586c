"""How provider requests travel, split the way YACE splits its clients.

- `iface`: what the layers agree on: a request, a reply, a failure, and the `Transport` (one
  attempt over the wire) and `Client` (calls with budget, retries and accounting) protocols.
- `reply`: reading a reply body with a cap, and decoding its JSON.
- `http`: the aiohttp `Transport`.
- `limiter`: the request budget.
- `gate`: whether a target's calls may go out now (Retry-After, refused credentials).
- `limited`: the `Client` every provider gets: a `Transport` behind the limiter, the gate,
  retries, metrics and logs.
"""
