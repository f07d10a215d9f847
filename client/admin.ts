import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { agentMemory } from '../workflows/agentMemory';
import { contextWindow } from '../workflows/contextWindow';
import { handOverSignal } from '../workflows/support';

/** Running workflows of the task queue, of these types when given. */
function runningOn(taskQueue: string, types?: readonly string[]): string {
  const quoted = (s: string) => `'${s.replace(/'/g, "\\'")}'`;
  const running = `TaskQueue = ${quoted(taskQueue)} AND ExecutionStatus = 'Running'`;
  return types ? `${running} AND WorkflowType IN (${types.map(quoted).join(', ')})` : running;
}

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
  for await (const wf of temporal.workflow.list({ query: runningOn(taskQueue) })) {
    await temporal.workflow
      .getHandle(wf.workflowId, wf.runId)
      .terminate(reason)
      .then(() => terminated++)
      // Already closed between the listing and the call: nothing left to do.
      .catch(() => undefined);
  }
  return terminated;
}

/** The workflows that run for as long as their agent or session: they hand over, not finish. */
const FOREVER_RUNNING = [agentMemory.name, contextWindow.name];

/**
 * Wake every running agent memory and context window of the task queue, so that each hands
 * over onto the current version of the workers (docs/versioning.md, Worker Versioning): an
 * idle one stays pinned to its old version until its next task. Returns how many were woken.
 * One that a newer version already runs on wakes, finds nothing to do, and sleeps again.
 */
export async function handOverRunning(temporal: Client, taskQueue: string): Promise<number> {
  let woken = 0;
  for await (const wf of temporal.workflow.list({ query: runningOn(taskQueue, FOREVER_RUNNING) })) {
    try {
      await temporal.workflow.getHandle(wf.workflowId, wf.runId).signal(handOverSignal);
      woken++;
    } catch (err) {
      // Closed, or handed over already, between the listing and the call.
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    }
  }
  return woken;
}
