import type { Client } from '@temporalio/client';
import type { Store } from '../../store/db';
import { hotAwaitingEmbedding } from '../../store/vectors';
import { agentMemoryWorkflowId } from '../../workflows/agentMemory';

/**
 * Until every id has a vector (of `model`, when given) and its entry records it. The agent's
 * workflow embeds after a write is acknowledged and then settles the entries, so a test that
 * compares entries or counts their reads waits for it first.
 */
export async function untilEmbedded(
  store: Store,
  agentId: string,
  ids: string[],
  model?: string,
): Promise<void> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const records = await store.vectors.find({ agentId, _id: { $in: ids } }).toArray();
    const vectors = records.filter((r) => r.vector && (model === undefined || r.model === model));
    // By the agent too: its index serves the read, where `_id: {$in}` alone reads every entry.
    const entries = [
      ...(await store.hot.find({ agentId, _id: { $in: ids } }).toArray()),
      ...(await store.cold.find({ agentId, _id: { $in: ids } }).toArray()),
    ];
    const settled = entries.filter(
      (e) =>
        !e.pending?.includes('embed') && (model === undefined ? e.embeddedWith : e.embeddedWith === model),
    );
    if (vectors.length === ids.length && new Set(settled.map((e) => e._id)).size === ids.length) return;
    if (Date.now() > deadline)
      throw new Error(`${vectors.length} of ${ids.length} entries got a vector, ${settled.length} settled`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Until no hot entry of the agent awaits its vector: the write path's embedding has settled. */
export async function untilHotEmbedded(store: Store, agentId: string): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (await hotAwaitingEmbedding(store, agentId)) {
    if (Date.now() > deadline) throw new Error(`hot entries of ${agentId} still await their vector`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * Until the agent's workflow has embedded what its last write created: an `embedEntries` it
 * scheduled after its last acknowledged write has completed. A night can embed those entries
 * first, and the workflow's own call still comes, later, for the same ids.
 */
export async function untilWritesEmbedded(temporal: Client, agentId: string): Promise<void> {
  const handle = temporal.workflow.getHandle(agentMemoryWorkflowId(agentId));
  const deadline = Date.now() + 120_000;
  for (;;) {
    const events = (await handle.fetchHistory()).events ?? [];
    let lastWrite = events.length - 1;
    while (lastWrite >= 0 && !events[lastWrite]!.workflowExecutionUpdateCompletedEventAttributes) lastWrite--;
    const scheduled = new Set(
      events
        .slice(lastWrite + 1)
        .filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'embedEntries')
        .map((e) => String(e.eventId)),
    );
    const completed = events.some((e) =>
      scheduled.has(String(e.activityTaskCompletedEventAttributes?.scheduledEventId)),
    );
    if (completed) return;
    if (Date.now() > deadline) throw new Error(`the workflow of ${agentId} has not embedded its last write`);
    await new Promise((r) => setTimeout(r, 250));
  }
}
