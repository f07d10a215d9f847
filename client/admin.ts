import type { Client } from '@temporalio/client';

/**
 * Terminate every running workflow on a task queue. Workflow ids derive from agent and
 * session ids, so a workflow left running on a queue nobody polls any more would capture
 * later writes to the same id; tests and benchmarks clean up their queues with this.
 */
export async function terminateOpenWorkflows(
  temporal: Client,
  taskQueue: string,
  reason: string,
): Promise<number> {
  let terminated = 0;
  const query = `TaskQueue = '${taskQueue.replace(/'/g, "\\'")}' AND ExecutionStatus = 'Running'`;
  for await (const wf of temporal.workflow.list({ query })) {
    await temporal.workflow
      .getHandle(wf.workflowId, wf.runId)
      .terminate(reason)
      .then(() => terminated++)
      // Already closed between the listing and the call: nothing left to do.
      .catch(() => undefined);
  }
  return terminated;
}
