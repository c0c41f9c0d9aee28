"""Write the REST server's OpenAPI document to clients/typescript/openapi.json, from which the TypeScript
client's types are generated (`npm run gen` there). Run it after changing a route:

    .venv/bin/python scripts/save_openapi.py

tests/test_ts_client.py fails while the saved file differs from what the server serves at /openapi.json.
"""

from __future__ import annotations

import json
from pathlib import Path

SAVED = Path(__file__).resolve().parents[1] / "clients" / "typescript" / "openapi.json"


def served_openapi() -> dict:
    """The document the server answers at /openapi.json (the app is built, the memory never opened)."""
    from memnets.server.app import create_app

    return create_app(lambda wrap: None).openapi()


def main() -> None:
    SAVED.write_text(json.dumps(served_openapi(), indent=2) + "\n", encoding="utf-8")
    print(f"wrote {SAVED}")


if __name__ == "__main__":
    main()
