"""An MCP server over stdio that misbehaves on purpose, for troupe's client tests.

Raw newline-delimited JSON-RPC, standard library only. `python3 hostile_server.py MODE [ARG…]`:

  list_hang         answers `initialize`, never `tools/list`
  paginate_forever  every `tools/list` page has one new tool and a next cursor
  refuse_then_hang  lists `echo` once; refuses every call; never answers `tools/list` again
  huge              `echo` answers with 17 MiB of text
  huge_no_id        `echo` answers with 17 MiB of text, the `id` after the result
  grandchild FILE   forks a child that sleeps; writes "SERVER_PID CHILD_PID" to FILE; both
                    ignore the end of stdin
  tools NAME…       lists the tools NAME… (each answers "ok")
"""

import json
import os
import sys
import time

MODE = sys.argv[1]
ARGS = sys.argv[2:]


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def tool(name):
    return {
        "name": name,
        "description": "a tool of the hostile server",
        "inputSchema": {"type": "object", "properties": {}},
    }


def main():
    if MODE == "grandchild":
        child = os.fork()
        if child == 0:
            time.sleep(600)
            os._exit(0)
        with open(ARGS[0], "w") as f:
            f.write(f"{os.getpid()} {child}")
    lists = 0
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        method = message.get("method")
        rid = message.get("id")
        if rid is None or method is None:
            continue
        params = message.get("params") or {}
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "0"},
            }})
        elif method == "tools/list":
            lists += 1
            if MODE == "list_hang" or (MODE == "refuse_then_hang" and lists > 1):
                continue
            if MODE == "paginate_forever":
                page = int(params.get("cursor") or 0)
                send({"jsonrpc": "2.0", "id": rid, "result": {
                    "tools": [tool(f"t{page}")], "nextCursor": str(page + 1)}})
                continue
            names = ARGS if MODE == "tools" else ["echo"]
            send({"jsonrpc": "2.0", "id": rid, "result": {"tools": [tool(n) for n in names]}})
        elif method == "tools/call":
            if MODE == "refuse_then_hang":
                send({"jsonrpc": "2.0", "id": rid,
                      "error": {"code": -32602, "message": "no tool `echo` here any more"}})
            elif MODE in ("huge", "huge_no_id"):
                text = "x" * (17 * 1024 * 1024)
                result = {"content": [{"type": "text", "text": text}]}
                if MODE == "huge":
                    send({"jsonrpc": "2.0", "id": rid, "result": result})
                else:
                    send({"jsonrpc": "2.0", "result": result, "id": rid})
            else:
                send({"jsonrpc": "2.0", "id": rid,
                      "result": {"content": [{"type": "text", "text": "ok"}]}})
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": rid, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": rid,
                  "error": {"code": -32601, "message": f"no method {method}"}})
    if MODE == "grandchild":
        time.sleep(600)


main()
