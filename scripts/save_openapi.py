"""Write the REST server's OpenAPI document to clients/typescript/openapi.json and the TypeScript types
generated from it to clients/typescript/src/schema.ts (`npm run gen` there: openapi-typescript, the
version package-lock.json pins). Run it after changing a route, a body or an answer (the arguments'
model is memnets/memory/fields.py, the answers memnets/server/routes/answers.py):

    .venv/bin/python scripts/save_openapi.py

tests/server/test_ts_client.py fails while the saved document differs from what the server serves at
/openapi.json, or schema.ts from what openapi-typescript makes of it. The second step needs node and
`npm ci` done in clients/typescript; without them the script says so and writes the document only.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

CLIENT = Path(__file__).resolve().parents[1] / "clients" / "typescript"
SAVED = CLIENT / "openapi.json"


def served_openapi() -> dict:
    """The document the server answers at /openapi.json (the app is built, the memory never opened)."""
    from memnets.server.app import create_app

    return create_app(lambda wrap: None).openapi()


def main() -> None:
    SAVED.write_text(json.dumps(served_openapi(), indent=2) + "\n", encoding="utf-8")
    print(f"wrote {SAVED}")
    npm = shutil.which("npm")
    if npm is None or not (CLIENT / "node_modules" / ".bin" / "openapi-typescript").exists():
        sys.exit(f"not written: {CLIENT / 'src' / 'schema.ts'}: run `npm ci && npm run gen` in {CLIENT}")
    subprocess.run([npm, "run", "--silent", "gen"], cwd=CLIENT, check=True)
    print(f"wrote {CLIENT / 'src' / 'schema.ts'}")


if __name__ == "__main__":
    main()
