"""Write the gateway's OpenAPI description, the source the TypeScript client's types are
generated from (clients/typescript/), without starting anything.

    python -m ops.openapi --out clients/typescript/openapi.json
    python -m ops.openapi --check clients/typescript/openapi.json   # exit 1 if it drifted

The app is built by `memoryd.api.app.create_app` on a runtime that is never used: `Runtime` opens
its Redis connection, store and models lazily, on first use, and describing the routes
uses none of them. The JSON is written with a fixed layout (two-space indent, non-ASCII
kept, final newline) so a regenerated file differs from the committed one only when the
API did.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "clients" / "typescript" / "openapi.json"


def openapi_document() -> dict[str, Any]:
    from memoryd.api.app import create_app
    from memoryd.platform.settings import Settings
    from memoryd.runtime import Runtime
    from memoryd.tenancy.auth import KeyRing

    with tempfile.TemporaryDirectory(prefix="memoryd-openapi-") as data_dir:
        # An unreachable Redis on purpose: nothing here may connect.
        settings = Settings(data_dir=Path(data_dir), redis_url="redis://127.0.0.1:1/0",
                            start_redis=False)
        runtime = Runtime(settings)
        try:
            document: dict[str, Any] = create_app(runtime, KeyRing({})).openapi()
        finally:
            runtime.close()
    return document


def render(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.openapi", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--out", type=Path, help=f"file to write (default {DEFAULT_OUT})")
    group.add_argument("--check", type=Path, metavar="FILE",
                       help="compare FILE with the current description; exit 1 if they differ")
    args = parser.parse_args(argv)
    text = render(openapi_document())
    if args.check is not None:
        current = args.check.read_text(encoding="utf-8") if args.check.exists() else ""
        if current != text:
            print(f"{args.check} is not the gateway's current OpenAPI description: "
                  "run python -m ops.openapi --out FILE, then npm run generate in "
                  "clients/typescript", file=sys.stderr)
            return 1
        print(f"{args.check} is current")
        return 0
    out: Path = args.out or DEFAULT_OUT
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
