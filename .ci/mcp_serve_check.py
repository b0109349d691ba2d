"""Drive `troupe mcp serve` with the PyPI `mcp` package's client (a second, independent MCP
implementation): initialize, list the tools, compact a transcript, expand it back, and check
that the original messages come back. Usage: mcp_serve_check.py TROUPE_BINARY TRANSCRIPT"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def payload(result):
    assert not result.is_error, result
    return json.loads(result.content[0].text)


async def main(binary, transcript):
    # `path` reads only beneath the server's root: the transcript's directory here.
    transcript = os.path.abspath(transcript)
    root = os.path.dirname(transcript)
    server = StdioServerParameters(command=binary, args=["mcp", "serve", "--root", root])
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            names = sorted(t.name for t in (await session.list_tools()).tools)
            assert names == ["compact_transcript", "count_tokens", "expand_transcript"], names
            compacted = payload(await session.call_tool(
                "compact_transcript", {"path": transcript, "window": 8192, "target": 0.4}))
            report = compacted["report"]
            assert report["tokens_after"] < report["tokens_before"], report
            expanded = payload(await session.call_tool(
                "expand_transcript", {"archive_id": compacted["archive_id"]}))
            with open(transcript) as f:
                original = json.load(f)
            original = original["messages"] if isinstance(original, dict) else original
            assert len(expanded["messages"]) == len(original), (len(expanded["messages"]), len(original))
            for got, want in zip(expanded["messages"], original):
                assert got.get("role") == want.get("role") and got.get("content") == want.get("content"), (got, want)
            print(f"troupe mcp serve: {report['tokens_before']} -> {report['tokens_after']} tokens, "
                  f"{len(original)} messages restored")


asyncio.run(main(sys.argv[1], sys.argv[2]))
