"""The load generator: replays a simulated (or recorded) web against the service over HTTP."""
