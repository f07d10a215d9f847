import type { Client } from '@temporalio/client';
import type { Payload } from '@temporalio/common';
import type { WriteEntry } from '../core/entry';
import { isSealedWrite, type WriteUpdate } from '../core/sealed';
import { jsonOf } from '../codec/codecServer';
import type { ContentCodec } from '../codec/payloadCodec';
import { openEntry } from '../codec/sealedEntry';
import { contentKeys } from '../store/contentKeys';
import type { Store } from '../store/db';
import { erasedAmong } from '../store/erasure';
import { writtenEntryId } from '../store/entries';
import type { VerifyFinding } from '../store/verify';
import { agentMemoryWorkflowId } from '../workflows/agentMemory';

/**
 * `memgate verify` over Temporal (docs/invariants.md, Erased from Temporal history): every run
 * of the agent's workflow, its whole history read through the Temporal API and decoded as a
 * worker decodes it. An erased entry that can still be read there is a finding: sealed under
 * a key that is still held, or written in clear (a history from before writes were sealed).
 */
export async function erasedInHistory(
  temporal: Client,
  codec: ContentCodec,
  store: Store,
  agentId: string,
): Promise<{ findings: VerifyFinding[]; runs: number }> {
  const workflowId = agentMemoryWorkflowId(agentId);
  const findings: VerifyFinding[] = [];
  let runs = 0;
  for await (const run of temporal.workflow.list({ query: `WorkflowId = "${workflowId}"` })) {
    runs++;
    const history = await temporal.workflow.getHandle(workflowId, run.runId).fetchHistory();
    for (const payload of payloadsIn(history)) {
      const [decoded] = await codec.decode([payload]);
      for (const write of writesIn(jsonOf(decoded!))) {
        if (write.agentId !== agentId) continue;
        findings.push(...(await readableErased(store, write, run.runId)));
      }
    }
  }
  return { findings, runs };
}

async function readableErased(store: Store, write: WriteUpdate, runId: string): Promise<VerifyFinding[]> {
  const finding = (id: string, how: string): VerifyFinding => ({
    check: 'erased-in-temporal-history',
    agentId: write.agentId,
    id,
    detail: `run ${runId} of the agent's workflow holds the erased entry ${how}`,
  });
  if (isSealedWrite(write)) {
    const ids = write.entries.map((e) => e.id);
    const [erased, keys] = await Promise.all([
      erasedAmong(store, write.agentId, ids),
      contentKeys(store, write.agentId, ids),
    ]);
    return write.entries
      .filter(
        (e) =>
          erased.has(e.id) && keys.has(e.id) && openEntry(write.agentId, e.id, e.sealed, keys.get(e.id)!),
      )
      .map((e) => finding(e.id, 'sealed under a key that is still held'));
  }
  const ids = write.entries.flatMap((e: WriteEntry) =>
    e.writtenAt === undefined ? [] : [writtenEntryId(write.agentId, { ...e, writtenAt: e.writtenAt })],
  );
  const erased = await erasedAmong(store, write.agentId, ids);
  return [...erased].map((id) => finding(id, 'in clear'));
}

/** Every payload a history holds, wherever in its events. */
function* payloadsIn(value: unknown): Generator<Payload> {
  if (value === null || typeof value !== 'object' || value instanceof Uint8Array) return;
  const v = value as Record<string, unknown>;
  if (v.data instanceof Uint8Array && v.metadata !== null && typeof v.metadata === 'object') {
    yield v as Payload;
    return;
  }
  for (const child of Array.isArray(value) ? value : Object.values(v)) yield* payloadsIn(child);
}

/** The writes a decoded value holds: an Update's argument, or a batch of them (an activity's input). */
function* writesIn(value: unknown): Generator<WriteUpdate> {
  if (value === null || typeof value !== 'object') return;
  const v = value as Partial<WriteUpdate>;
  if (typeof v.agentId === 'string' && Array.isArray(v.entries) && v.entries.length > 0) {
    yield v as WriteUpdate;
    return;
  }
  for (const child of Array.isArray(value) ? value : Object.values(value)) yield* writesIn(child);
}
