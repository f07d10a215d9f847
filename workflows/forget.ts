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

/** `@` is in neither an agent's nor an entry's ids (core/entry.ts, core/messages.ts): one id per pair. */
export function forgetWorkflowId(agentId: string, entryId: string): string {
  return `memgate-forget-${agentId}@${entryId}`;
}

/**
 * Erasure (docs/invariants.md, Erasure wins): a content-free tombstone first, then the content
 * leaves both tiers, the query log and every summary derived from it (rewritten without it
 * with no model call, or removed and flagged), and only then does the summariser word the
 * rewritten summaries: a summariser that fails fails the erasure, never leaves its content
 * readable. Each step is idempotent, so the workflow can be rerun at any point.
 */
export async function forget(raw: ForgetInput) {
  const input = validated(forgetInputSchema, raw, 'forget');
  const step = { ...input, at: Date.now() };
  await forgetTombstone(step);
  const policy = await currentPolicy();
  const erased = await forgetEntry({ ...step, policy });
  const derived = await forgetDerived({ ...step, policy });
  return {
    entryId: input.entryId,
    resummarised: derived.resummarised,
    removed: [...erased.removed, ...derived.removed],
    restored: erased.restored,
    tiers: erased.tiers,
    queriesRemoved: erased.queriesRemoved + derived.queriesRemoved,
  };
}
