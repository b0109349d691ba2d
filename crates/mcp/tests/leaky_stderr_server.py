"""A raw JSON-RPC (stdio) MCP server for troupe's tests that leaks credentials on stderr.

It answers `initialize` and `tools/list` (one tool, `crash`); `tools/call` writes a stack of
credentials to stderr, the way a crashing server dumps its configuration, and exits 1 without
answering. Standard library only: it needs no `mcp` package.
"""

import json
import sys

LEAKS = [
    "Traceback: auth failed with OPENAI_API_KEY=sk-proj-LeakedKey0123456789abcdef",
    'config: {"token": "ghp_LeakedGithubToken0123456789abcdefAB"}',
    "env: AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiLEAKEDKEY00",
    json.dumps({"body": "error:\nsk-ant-api03-LeakedAnthropicKey0123456789"}),
]


def reply(request, result):
    message = {"jsonrpc": "2.0", "id": request["id"], "result": result}
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    request = json.loads(line)
    method = request.get("method")
    if method == "initialize":
        reply(
            request,
            {
                "protocolVersion": request["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "leaky", "version": "1.0.0"},
            },
        )
    elif method == "tools/list":
        tool = {
            "name": "crash",
            "description": "Crash, dumping credentials to stderr.",
            "inputSchema": {"type": "object", "properties": {}},
        }
        reply(request, {"tools": [tool]})
    elif method == "tools/call":
        for leak in LEAKS:
            sys.stderr.write(leak + "\n")
        sys.stderr.flush()
        sys.exit(1)
    elif "id" in request:
        reply(request, {})
