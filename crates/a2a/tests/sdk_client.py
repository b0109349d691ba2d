"""The official A2A Python SDK's client (a2a-sdk, pinned by .ci/run) driving `troupe a2a serve`'s
agents: card, send, stream, get, list, cancel. Prints one line per check; exits non-zero on the
first failure.

Usage: sdk_client.py CODER_URL SLEEPER_URL — base URLs of an agent that answers and of one that
never does. A2A_TEST_KEY, when set, is sent as a Bearer token.
"""

import asyncio
import os
import sys

import httpx

from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.helpers.proto_helpers import new_text_message
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Role,
    SendMessageRequest,
    TaskState,
)


def http_client() -> httpx.AsyncClient:
    key = os.environ.get("A2A_TEST_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.AsyncClient(headers=headers, timeout=30)


def text_of(task) -> str:
    return "".join(p.text for a in task.artifacts for p in a.parts)


async def main() -> None:
    coder_url, sleeper_url = sys.argv[1], sys.argv[2]

    # Plain send (no streaming): the finished task.
    plain = await create_client(coder_url, ClientConfig(streaming=False, httpx_client=http_client()))
    card = await A2ACardResolver(http_client(), coder_url).get_agent_card()
    print(f"CARD name={card.name} streaming={card.capabilities.streaming}")
    request = SendMessageRequest(message=new_text_message("hello", role=Role.ROLE_USER))
    last = None
    async for event in plain.send_message(request):
        last = event
    task = last.task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
    print(f"SEND state={TaskState.Name(task.status.state)} text={text_of(task)}")

    got = await plain.get_task(GetTaskRequest(id=task.id))
    print(f"GET state={TaskState.Name(got.status.state)} history={len(got.history)}")
    listed = await plain.list_tasks(ListTasksRequest(context_id=task.context_id))
    print(f"LIST total={listed.total_size}")

    # Streaming: the task, then its updates, ending completed.
    streaming = await create_client(coder_url, ClientConfig(streaming=True, httpx_client=http_client()))
    kinds = []
    text = ""
    async for event in streaming.send_message(
        SendMessageRequest(message=new_text_message("stream it", role=Role.ROLE_USER))
    ):
        kind = event.WhichOneof("payload")
        kinds.append(kind)
        if kind == "artifact_update":
            text += "".join(p.text for p in event.artifact_update.artifact.parts)
        if kind == "status_update":
            state = event.status_update.status.state
    print(f"STREAM first={kinds[0]} last_state={TaskState.Name(state)} text={text}")

    # Cancel a task that would never end.
    sleeper = await create_client(sleeper_url, ClientConfig(streaming=True, httpx_client=http_client()))
    stream = sleeper.send_message(
        SendMessageRequest(message=new_text_message("sleep", role=Role.ROLE_USER))
    )
    first = await anext(stream)
    task_id = first.task.id
    cancelled = await sleeper.cancel_task(CancelTaskRequest(id=task_id))
    print(f"CANCEL state={TaskState.Name(cancelled.status.state)}")
    final = await sleeper.get_task(GetTaskRequest(id=task_id))
    print(f"CANCELLED state={TaskState.Name(final.status.state)}")
    await stream.aclose()


if __name__ == "__main__":
    asyncio.run(main())
