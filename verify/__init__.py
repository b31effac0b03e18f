"""certfsm.verify: prove properties of a controller network."""
