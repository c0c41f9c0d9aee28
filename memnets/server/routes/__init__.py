"""The REST routes, one module per resource, each an APIRouter that :func:`memnets.server.app.create_app` includes.

- :mod:`.memories`: add, list, get, update, history, derived, delete, delete_all (``/v1/memories``).
- :mod:`.search`: a search with each hit's score parts (``/v1/search``).
- :mod:`.users`: the users a token reaches, and who it is (``/v1/users``, ``/v1/whoami``).
- :mod:`.manager`: this process's manager of a user: observe, context, its tiers (``/v1/users/{user}/...``).
- :mod:`.pack`: the pack's manifest (``/v1/pack``).
- :mod:`.health`: ``/healthz``, ``/readyz``, ``/metrics``.
- :mod:`.ui`: the offline API docs (``/docs``) and the inspector (``/ui``).

Every route is a thin translation of one AgentMemory call: the request's JSON fields are the call's
keyword arguments (times as ISO 8601 strings), so an argument the API gains reaches it without a
change here, and the API's own validation names what is wrong. A route reaches the memory through
its public methods only, never its store, encoder or a manager's insides.
"""

from memnets.server.routes import health, manager, memories, pack, search, ui, users

ROUTERS = tuple(module.router for module in (health, ui, memories, search, users, manager, pack))
