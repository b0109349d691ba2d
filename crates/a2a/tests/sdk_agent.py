"""A small A2A agent written with the official Python SDK (a2a-sdk, pinned by .ci/run), which
troupe's A2A client is tested against: a real peer, not troupe's idea of one.

Usage: sdk_agent.py PORT_FILE — listens on a free loopback port and writes its base URL to
PORT_FILE once it accepts connections.

Behaviour, chosen by the request text:
- "ask me ...": the task goes to input-required asking "Which city?"; the next message on the
  same task completes it with "sunny in <answer>".
- "slow ...": an artifact chunk every 50 ms until the task is cancelled (an endless stream).
- "bearer": the same as echo, but refuses unless `Authorization: Bearer $A2A_TEST_KEY`.
- anything else: streams "echo: " and the text as artifact chunks, then completes.
"""

import asyncio
import os
import socket
import sys

import uvicorn
from starlette.applications import Starlette

from a2a.helpers.proto_helpers import new_task, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events.event_queue_v2 import EventQueue
from a2a.server.request_handlers import DefaultRequestHandlerV2
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Role,
    TaskState,
)


class Weather(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        task = context.current_task
        if task is None:
            await event_queue.enqueue_event(
                new_task(context.task_id, context.context_id, TaskState.TASK_STATE_SUBMITTED,
                         history=[context.message])
            )
        await updater.start_work()
        waiting = task is not None and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        if waiting:
            await updater.add_artifact([new_text_part(f"sunny in {text}")], name="answer")
            await updater.complete()
        elif text.startswith("ask me"):
            await updater.requires_input(
                new_text_message("Which city?", context_id=context.context_id,
                                 task_id=context.task_id, role=Role.ROLE_AGENT)
            )
        elif text.startswith("slow"):
            n = 0
            while True:
                await updater.add_artifact([new_text_part(f"tick {n} ")], artifact_id="ticks",
                                           append=n > 0)
                n += 1
                await asyncio.sleep(0.05)
        else:
            await updater.add_artifact([new_text_part("echo: ")], artifact_id="a", name="answer")
            await updater.add_artifact([new_text_part(text)], artifact_id="a", append=True,
                                       last_chunk=True)
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel()


def main() -> None:
    port_file = sys.argv[1]
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    card = AgentCard(
        name="weather",
        description="Says what the weather is; asks which city when it is not told.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=base + "/", protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(id="weather", name="weather", description="the weather in a city",
                       tags=["weather"])
        ],
    )
    handler = DefaultRequestHandlerV2(
        agent_executor=Weather(), task_store=InMemoryTaskStore(), agent_card=card
    )
    routes = create_agent_card_routes(card) + create_jsonrpc_routes(handler, "/")
    app = Starlette(routes=routes)
    config = uvicorn.Config(app, log_level="warning")
    server = uvicorn.Server(config)

    async def serve() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
        with open(port_file + ".tmp", "w") as f:
            f.write(base)
        os.replace(port_file + ".tmp", port_file)
        await task

    asyncio.run(serve())


if __name__ == "__main__":
    main()
