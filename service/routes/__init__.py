"""HTTP routes: parse, call one use case, shape the answer."""
