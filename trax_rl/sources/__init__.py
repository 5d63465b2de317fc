"""Where experience comes from: gymnasium envs, JAX envs on the device, Ray actors."""
