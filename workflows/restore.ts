import { proxyActivities } from '@temporalio/workflow';
import type { RestoreActivities } from '../activities';
import { restoreInputSchema, type RestoreInput } from '../core/messages';
import { RETRY, validated } from './support';

export type { RestoreInput };

const { restoreEntry } = proxyActivities<RestoreActivities>({
  startToCloseTimeout: '1 minute',
  heartbeatTimeout: '20 seconds',
  retry: RETRY,
});

/** `@` is in neither an agent's nor an entry's ids (core/entry.ts, core/messages.ts): one id per pair. */
export function restoreWorkflowId(agentId: string, entryId: string): string {
  return `memgate-restore-${agentId}@${entryId}`;
}

/** `memgate restore`: reverse a supersession (or renew an expired fact), with a ledger record. */
export async function restore(raw: RestoreInput) {
  const input = validated(restoreInputSchema, raw, 'restore');
  return restoreEntry({ ...input, at: Date.now() });
}
