import type { Provenance } from './entry';
import { base64url, sha256 } from './sha256';

/**
 * The deterministic ids of entries, summaries and nightly runs: the same inputs always name
 * the same document or run, so a retry lands on what the first attempt wrote. Pure, so the
 * simulation and the workflows derive the ids the store writes.
 */

/** Deterministic `_id`: a retried write lands on the same document. */
export function entryId(
  agentId: string,
  key: { idempotencyKey: string } | { text: string; source: Provenance; writtenAt: number },
): string {
  const derivedFrom =
    'idempotencyKey' in key
      ? `key\0${key.idempotencyKey}`
      : `content\0${key.text}\0${JSON.stringify(key.source)}\0${String(key.writtenAt)}`;
  return digestId(`${agentId}\0${derivedFrom}`);
}

/** Deterministic summary id: the same sources always make the same summary document. */
export function summaryId(agentId: string, sourceIds: readonly string[]): string {
  const sources = [...sourceIds]
    .sort()
    .map((id) => `${id}\0`)
    .join('');
  return digestId(`${agentId}\0summary\0${sources}`);
}

/** The same agent and instant always make the same run, whose ledger records it rewrites. */
export function consolidationRunId(agentId: string, asOf: number): string {
  return `${agentId}@${new Date(asOf).toISOString()}`;
}

export function consolidateAgentWorkflowId(agentId: string, asOf: number): string {
  return `memgate-consolidate-${consolidationRunId(agentId, asOf)}`;
}

/** 32 base64url characters (192 bits) of the text's SHA-256. */
function digestId(text: string): string {
  return base64url(sha256(text)).slice(0, 32);
}
