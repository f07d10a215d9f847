import { proxyActivities } from '@temporalio/workflow';
import type { ForgetActivities } from '../activities';
import { forgetInputSchema, type ForgetInput } from '../core/messages';
import { RETRY, validated } from './support';

export type { ForgetInput };

// Short steps, except a summary rebuilt with the model; each heartbeats while it runs.
const { forgetTombstone, forgetDerived, forgetEntry, currentPolicy } = proxyActivities<ForgetActivities>({
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '20 seconds',
  retry: RETRY,
});

export function forgetWorkflowId(agentId: string, entryId: string): string {
  return `memgate-forget-${agentId}-${entryId}`;
}

/**
 * Erasure (docs/invariants.md, Erasure wins): a content-free tombstone first, then every
 * summary derived from the entry is rebuilt without it or removed and flagged, then the
 * entry leaves both tiers and the query log. Each step is idempotent, so the workflow can
 * be rerun at any point.
 */
export async function forget(raw: ForgetInput) {
  const input = validated(forgetInputSchema, raw, 'forget');
  const step = { ...input, at: Date.now() };
  await forgetTombstone(step);
  const derived = await forgetDerived({ ...step, policy: await currentPolicy() });
  const removed = await forgetEntry(input);
  return { entryId: input.entryId, ...derived, ...removed };
}
