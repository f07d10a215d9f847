"""A memgate write from Python, through the official Temporal SDK and nothing of memgate's.

The cross-language contract (docs/interfaces.md, From Python, or any language with a Temporal SDK): the workflow type `agentMemory`, its id
`memgate-agent-<agentId>`, its input `{"agentId": ...}`, and the Update `write` whose payload
is the write request as JSON; every payload goes through memgate's codec endpoint
(`POST <codec>/encode`, `/decode`, Temporal's codec-server protocol), which encrypts it and
seals each entry under a key of its own (docs/erasure.md). Prints the Update's result as
JSON, or the failure's type and message when the Update is refused.
"""

import asyncio
import dataclasses
import json
import os
import sys
import urllib.request
from typing import List, Sequence

import temporalio.converter
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WithStartWorkflowOperation, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError


class RemoteCodec(temporalio.converter.PayloadCodec):
    """Payloads encoded and decoded by memgate's codec endpoint, with the agent's API key."""

    def __init__(self, endpoint: str, key: str, namespace: str) -> None:
        self.endpoint = endpoint
        self.headers = {
            "content-type": "application/json",
            "authorization": f"Bearer {key}",
            "x-namespace": namespace,
        }

    def _call(self, direction: str, payloads: Sequence[Payload]) -> List[Payload]:
        body = json.dumps({"payloads": [json_format.MessageToDict(p) for p in payloads]}).encode()
        request = urllib.request.Request(
            f"{self.endpoint}/{direction}", data=body, headers=self.headers, method="POST"
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            answered = json.load(response)["payloads"]
        return [json_format.ParseDict(p, Payload()) for p in answered]

    async def encode(self, payloads: Sequence[Payload]) -> List[Payload]:
        return await asyncio.to_thread(self._call, "encode", payloads)

    async def decode(self, payloads: Sequence[Payload]) -> List[Payload]:
        return await asyncio.to_thread(self._call, "decode", payloads)


async def main(
    address: str, namespace: str, task_queue: str, codec: str, key: str, request_json: str
) -> None:
    request = json.loads(request_json)
    agent_id = request["agentId"]
    converter = dataclasses.replace(
        temporalio.converter.default(), payload_codec=RemoteCodec(codec, key, namespace)
    )
    client = await Client.connect(address, namespace=namespace, data_converter=converter)
    start = WithStartWorkflowOperation(
        "agentMemory",
        {"agentId": agent_id},
        id=f"memgate-agent-{agent_id}",
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )
    try:
        result = await client.execute_update_with_start_workflow(
            "write", request, start_workflow_operation=start
        )
    except WorkflowUpdateFailedError as err:
        cause = err.cause
        kind = cause.type if isinstance(cause, ApplicationError) else type(cause).__name__
        print(json.dumps({"error": {"type": kind, "message": str(cause)}}))
        return
    print(json.dumps(result))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:7]))
    sys.stdout.flush()
    # The SDK's native runtime can abort while the interpreter finalizes its threads; the
    # answer is printed by then, so leave without finalizing.
    os._exit(0)
