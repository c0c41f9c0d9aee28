"""memnets as a service: the REST server (``memnets serve http``), its client and the web inspector.

- :mod:`memnets.server.app`: the FastAPI app over one AgentMemory (routes under ``/v1``), built from
  :mod:`~memnets.server.state` (what the app holds), :mod:`~memnets.server.errors` (the JSON error
  answers), :mod:`~memnets.server.caller` (the caller's scope, a dependency) and
  :mod:`memnets.server.routes` (one router per resource).
- :mod:`memnets.server.run`: its config and uvicorn (one process or several workers), over
  :mod:`memnets.server.protocol` (header and body timeouts, a connection limit).
- :mod:`memnets.server.auth`: admin and scoped tokens.
- :mod:`memnets.server.batching`: concurrent encodes in shared forward passes.
- :mod:`memnets.server.wire`: the JSON of memories, results and errors (shared with the client).
- :mod:`memnets.server.client`: :class:`memnets.Client`, AgentMemory's methods over HTTP.
- ``ui/``: the inspector at ``/ui`` (plain HTML and JavaScript, no build step, no CDN).

See docs/server.md.
"""
