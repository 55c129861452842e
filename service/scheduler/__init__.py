"""The use cases behind the routes: register, ingest events, dispatch, explain, rescore."""
