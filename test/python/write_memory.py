"""A memgate write from Python, through the official Temporal SDK and nothing of memgate's.

The cross-language contract (README, Agents in other languages): the workflow type
`agentMemory`, its id `memgate-agent-<agentId>`, its input `{"agentId": ...}`, and the
Update `write` whose payload is the write request as JSON. Prints the Update's result as JSON,
or the failure's type and message when the Update is refused.
"""

import asyncio
import json
import os
import sys

from temporalio.client import Client, WithStartWorkflowOperation, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError


async def main(address: str, namespace: str, task_queue: str, request_json: str) -> None:
    request = json.loads(request_json)
    agent_id = request["agentId"]
    client = await Client.connect(address, namespace=namespace)
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
    asyncio.run(main(*sys.argv[1:5]))
    sys.stdout.flush()
    # The SDK's native runtime can abort while the interpreter finalizes its threads; the
    # answer is printed by then, so leave without finalizing.
    os._exit(0)
