import type { Collection, Filter } from 'mongodb';
import type { Store } from './db';
import { erasedWhole } from './eraseAgent';

/** The record of each completed run, and when the last one was. */

export interface RunRecord {
  _id: string;
  kind: 'agent' | 'nightly' | 'audit';
  agentId?: string;
  asOf: number;
  status: 'completed';
  finishedAt: number;
  counts: Record<string, number>;
  [key: string]: unknown;
}

function runs(store: Store): Collection<RunRecord> {
  return store.runs as unknown as Collection<RunRecord>;
}

export async function recordRun(store: Store, run: RunRecord): Promise<void> {
  const { _id, ...rest } = run;
  await runs(store).replaceOne({ _id }, rest, { upsert: true });
}

/**
 * An agent's nightly run is recorded unless the agent is being or has been erased whole: a
 * night lists its agents a page at a time and may run one after its erasure closed the
 * agent's workflows. Written first and looked at after, as every copy is (docs/invariants.md,
 * Erasure wins): the erasure deletes the agent's record before its runs' records, so a run
 * recorded before that delete goes with them, and one recorded after it finds the erasure.
 */
export async function recordAgentRun(store: Store, run: RunRecord & { agentId: string }): Promise<void> {
  await recordRun(store, run);
  if (await erasedWhole(store, run.agentId)) await runs(store).deleteOne({ _id: run._id });
}

/** The `asOf` of the latest completed run of this kind (and agent) before `asOf`, if any. */
export async function previousRunAsOf(
  store: Store,
  asOf: number,
  scope: { kind: 'agent'; agentId: string } | { kind: 'nightly' },
): Promise<number | undefined> {
  const filter: Filter<RunRecord> = { kind: scope.kind, status: 'completed', asOf: { $lt: asOf } };
  if (scope.kind === 'agent') filter.agentId = scope.agentId;
  const [last] = await runs(store).find(filter).sort({ asOf: -1 }).limit(1).toArray();
  return last?.asOf;
}
