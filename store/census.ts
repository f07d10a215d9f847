import { addDeltas, censusDelta, tombstoneKind, type Copy } from '../core/census';
import type { Store } from './db';

/**
 * The agent's census (core/census.ts), kept in its record beside the tier counts: each change
 * of an entry or a tombstone adds its delta once the write that made it has landed, so a rerun
 * that finds its change already made adds nothing. As with the tier counts, a crash between a
 * change and its count leaves that count off by the change.
 */

/** Adds these deltas to the agent's entry counts, in one update (none when they cancel out). */
export async function countChanges(
  store: Store,
  agentId: string,
  changes: readonly { before?: Copy | undefined; after?: Copy | undefined }[],
): Promise<void> {
  const delta = addDeltas(changes.map((c) => censusDelta(c.before, c.after)));
  const inc = Object.fromEntries(Object.entries(delta).map(([key, n]) => [`census.entries.${key}`, n]));
  if (Object.keys(inc).length > 0) await store.agents.updateOne({ _id: agentId }, { $inc: inc });
}

/** Tombstones of these reasons were written (`to`), withdrawn or replaced (`from`), in one update. */
export async function countTombstones(
  store: Store,
  agentId: string,
  changes: readonly { from?: string | undefined; to?: string | undefined }[],
): Promise<void> {
  const inc: Record<string, number> = {};
  const add = (reason: string, n: number) => {
    const key = `census.tombstones.${tombstoneKind(reason)}`;
    inc[key] = (inc[key] ?? 0) + n;
  };
  for (const { from, to } of changes) {
    if (from !== undefined) add(from, -1);
    if (to !== undefined) add(to, 1);
  }
  for (const key of Object.keys(inc)) if (inc[key] === 0) delete inc[key];
  if (Object.keys(inc).length > 0) await store.agents.updateOne({ _id: agentId }, { $inc: inc });
}
