import { proxyActivities } from '@temporalio/workflow';
import type { ReembedActivities } from '../activities';
import { reembedInputSchema, type ReembedInput, type ReembedResult } from '../core/messages';
import { RETRY, validated } from './support';

export type { ReembedInput };

// Both steps page through the agent's whole store and heartbeat as they go; each is
// idempotent and keeps its progress in the store (an entry's `embed` work leaves once its
// vector is stored), so a retried step, on any worker, goes on from where the last one stopped.
const { markForReembedding, reembedAwaiting } = proxyActivities<ReembedActivities>({
  startToCloseTimeout: '6 hours',
  heartbeatTimeout: '30 seconds',
  retry: RETRY,
});

export function reembedWorkflowId(agentId: string): string {
  return `memgate-reembed-${agentId}`;
}

/**
 * `memgate reembed`: after a change of embedding model, every entry of the agent (both
 * tiers) gets a vector of the new one. Until it has, recall finds the entries still on the
 * old model lexically only, and says how many there are.
 */
export async function reembed(raw: ReembedInput): Promise<ReembedResult> {
  const input = validated(reembedInputSchema, raw, 'reembed');
  const marked = await markForReembedding(input.agentId);
  const embedded = await reembedAwaiting(input);
  return { agentId: input.agentId, model: input.model, marked, embedded };
}
