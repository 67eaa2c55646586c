"""How a target's calls are made: refresh tiers, the plan, the paced queue and its runner."""
