"""The actor-critic family's network layouts (separate or joint networks)
and its data: what `algorithms.actor_critic` trains."""
