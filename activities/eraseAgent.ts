import { getClient } from '@temporalio/activity';
import { WorkflowNotFoundError } from '@temporalio/common';
import type { Config } from '../core/config';
import {
  agentWorkflowsSchema,
  eraseAgentRecordsSchema,
  eraseAgentStepSchema,
  parseInput,
} from '../core/messages';
import type { Store } from '../store/db';
import { releaseWindowClaims } from '../store/quotas';
import {
  eraseAgentMemory,
  eraseAgentRecords,
  registeredAmong,
  type MemoryErased,
  type RecordsErased,
} from '../store/eraseAgent';
import { heartbeat } from './liveness';

/** The gRPC status of a workflow execution the server does not have (any more). */
const GRPC_NOT_FOUND = 5;

/** What may follow an agent's id in a session named after it (`a1-chat`): the non-alphanumerics an id allows. */
const SEPARATORS = new Set(['-', '_', '.', ':']);

/**
 * Whether a context window's session is the agent's: its id is the agent's, or begins with it
 * and a separator, and no longer agent id that has written claims it. A longer id claims the
 * sessions whose id is it, or begins with it and a separator: `a1-x-chat` is agent `a1-x`'s
 * once `a1-x` has written, not `a1`'s.
 */
async function sessionOfAgent(store: Store, agentId: string, sessionId: string): Promise<boolean> {
  if (sessionId !== agentId && !(sessionId.startsWith(agentId) && SEPARATORS.has(sessionId[agentId.length]!)))
    return false;
  const longer: string[] = [sessionId];
  for (let i = agentId.length + 1; i < sessionId.length; i++) {
    if (SEPARATORS.has(sessionId[i]!)) longer.push(sessionId.slice(0, i));
  }
  const claimed = await registeredAmong(
    store,
    longer.filter((id) => id !== agentId),
  );
  return claimed.size === 0;
}

/** Erasing a whole agent (docs/erasure.md), one idempotent step per activity, keyed by the agent id. */
export function createEraseAgentActivities(store: Store, config: Pick<Config, 'nightlyBatch'>) {
  return {
    /**
     * Every workflow of the agent (its memory, its context windows, its nightly runs, its
     * re-embedding) is terminated if it runs and its history deleted: histories hold what
     * was written (a write's entries are its Update's argument). Found through the server's
     * visibility, which lags a moment behind a start: one started meanwhile is found by the
     * next erasure. Returns how many were running.
     */
    async closeAgentWorkflows(input: {
      agentId: string;
      ids: string[];
      prefixes: string[];
      windowIdPrefix: string;
    }): Promise<{ workflowsClosed: number }> {
      const { agentId, ids, prefixes, windowIdPrefix } = parseInput(
        agentWorkflowsSchema,
        input,
        'erase agent',
      );
      const client = getClient();
      // Every part is a checked workflow id (core/messages.ts): no quote ends a literal early.
      const query = [
        ...ids.map((id) => `WorkflowId = '${id}'`),
        ...[...prefixes, `${windowIdPrefix}${agentId}`].map((p) => `WorkflowId STARTS_WITH '${p}'`),
      ].join(' OR ');
      const found: { workflowId: string; runId: string; running: boolean }[] = [];
      for await (const wf of client.workflow.list({ query })) {
        heartbeat();
        const window = wf.workflowId.startsWith(windowIdPrefix);
        if (window && !(await sessionOfAgent(store, agentId, wf.workflowId.slice(windowIdPrefix.length))))
          continue;
        found.push({ workflowId: wf.workflowId, runId: wf.runId, running: wf.status.name === 'RUNNING' });
      }
      let workflowsClosed = 0;
      for (const { workflowId, runId, running } of found) {
        heartbeat();
        if (running) {
          try {
            await client.workflow.getHandle(workflowId, runId).terminate('the agent was erased');
            workflowsClosed++;
          } catch (err) {
            // Closed between the listing and the call.
            if (!(err instanceof WorkflowNotFoundError)) throw err;
          }
        }
        // Ended as a close would end it: the keys that opened it get their places back (again,
        // a no-op, for one an earlier attempt ended).
        if (workflowId.startsWith(windowIdPrefix))
          await releaseWindowClaims(store, workflowId.slice(windowIdPrefix.length));
        try {
          await client.workflowService.deleteWorkflowExecution({
            namespace: client.options.namespace,
            workflowExecution: { workflowId, runId },
          });
        } catch (err) {
          // Deleted already (by an earlier attempt, or one the server is still carrying out).
          if ((err as { code?: unknown }).code !== GRPC_NOT_FOUND) throw err;
        }
      }
      return { workflowsClosed };
    },

    async eraseAgentMemory(input: { agentId: string; at: number }): Promise<MemoryErased> {
      const { agentId, at } = parseInput(eraseAgentStepSchema, input, 'erase agent');
      return eraseAgentMemory(store, agentId, { at, batch: config.nightlyBatch, onBatch: () => heartbeat() });
    },

    async eraseAgentRecords(input: { agentId: string; at: number; erased: boolean }): Promise<RecordsErased> {
      const { agentId, ...opts } = parseInput(eraseAgentRecordsSchema, input, 'erase agent');
      return eraseAgentRecords(store, agentId, opts);
    },
  };
}
