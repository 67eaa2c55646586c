"""How provider requests travel: budget, gate, session, retries, and the reply under its cap."""
