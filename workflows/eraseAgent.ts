import { proxyActivities } from '@temporalio/workflow';
import type { EraseAgentActivities } from '../activities';
import { eraseAgentInputSchema, type EraseAgentInput, type EraseAgentResult } from '../core/messages';
import { agentMemoryWorkflowId } from './agentMemory';
import { contextWindowWorkflowId } from './contextWindow';
import { consolidateAgentWorkflowId } from '../core/ids';
import { reembedWorkflowId } from './reembed';
import { RETRY, validated } from './support';

export type { EraseAgentInput, EraseAgentResult };

// Each step pages through the agent's whole store (or its workflows) and heartbeats as it
// goes; each is idempotent, so a retried one, on any worker, finds done what was done.
const { closeAgentWorkflows, eraseAgentMemory, eraseAgentRecords } = proxyActivities<EraseAgentActivities>({
  startToCloseTimeout: '6 hours',
  heartbeatTimeout: '30 seconds',
  retry: RETRY,
});

export function eraseAgentWorkflowId(agentId: string): string {
  return `memgate-erase-agent-${agentId}`;
}

/**
 * Erase a whole agent (docs/erasure.md): its workflows first, so that none of them writes
 * for it any more, then every id of it behind an erasure tombstone and its entries, summaries
 * and vectors gone, then every other record that names it. Resumable: a crash anywhere is
 * retried from the step it was in; run again after it finished, it finds nothing to do.
 */
export async function eraseAgent(raw: EraseAgentInput): Promise<EraseAgentResult> {
  const { agentId } = validated(eraseAgentInputSchema, raw, 'erase agent');
  // The time of the workflow task, recorded in history: a retried step writes the same.
  const at = Date.now();
  // Every nightly run of the agent is named by the agent and its instant: what precedes the
  // instant is what all of them begin with.
  const epoch = new Date(0).toISOString();
  const { workflowsClosed } = await closeAgentWorkflows({
    agentId,
    ids: [agentMemoryWorkflowId(agentId), reembedWorkflowId(agentId)],
    prefixes: [consolidateAgentWorkflowId(agentId, 0).slice(0, -epoch.length)],
    // A window's id is this, then its session id.
    windowIdPrefix: contextWindowWorkflowId(''),
  });
  const memory = await eraseAgentMemory({ agentId, at });
  const erased = memory.tombstoned + memory.entriesRemoved + memory.vectorsCleared > 0;
  const records = await eraseAgentRecords({ agentId, at, erased });
  return { agentId, workflowsClosed, ...memory, ...records };
}
