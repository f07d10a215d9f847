import type { Tier } from './entry';
import { ConflictError } from './errors';

/**
 * Moving an entry between the hot and cold tiers without a transaction
 * (docs/invariants.md, Moves lose nothing): copy to the target by upsert first, then delete
 * the source only if it is still the version copied. At every instant the entry is in the
 * source, the target, or both — never in neither — and a rerun after a crash at any step
 * converges on the same result. The steps are written once, here, over any store that
 * offers these three operations (MongoDB in `store/`, an in-memory model in simulations and
 * property tests).
 */
export interface TierOps<D extends { _id: string; version: number }> {
  get(tier: Tier, id: string): Promise<D | undefined>;
  /** Insert or replace by `_id`. */
  put(tier: Tier, doc: D): Promise<void>;
  /** Delete by `_id`, only while the stored version equals `version`; true if deleted. */
  removeVersion(tier: Tier, id: string, version: number): Promise<boolean>;
}

/** Batched forms of the same operations, for moving many entries in a few round trips. */
export interface BatchTierOps<D extends { _id: string; version: number }> extends TierOps<D> {
  /** Insert or replace each by `_id`. */
  putMany(tier: Tier, docs: D[]): Promise<void>;
  /** Delete each `_id` whose stored version is the one given; returns how many were deleted. */
  removeVersions(tier: Tier, keys: { id: string; version: number }[]): Promise<number>;
}

export type MoveOutcome = 'moved' | 'already-moved' | 'absent';

/** Rounds of copy-and-delete before giving up on a source that keeps changing. */
const MAX_ROUNDS = 5;

export async function moveBetweenTiers<D extends { _id: string; version: number }>(
  ops: TierOps<D>,
  id: string,
  from: Tier,
  to: Tier,
  /** The target document for a source document; deterministic, so a rerun writes the same. */
  transform: (source: D) => D,
): Promise<MoveOutcome> {
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const source = await ops.get(from, id);
    if (!source) return (await ops.get(to, id)) ? 'already-moved' : 'absent';
    await ops.put(to, transform(source));
    if (await ops.removeVersion(from, id, source.version)) return 'moved';
    // The source changed between the read and the delete: copy its new version.
  }
  throw new ConflictError(`entry ${id} kept changing while it was moved from ${from} to ${to}`, {
    id,
    from,
    to,
  });
}

/**
 * The same move for many entries already read from `from`: copy them all, then delete
 * them all, each only at the version copied. When some delete does not match (a source
 * changed or left since it was read), each entry is finished one by one, which is a no-op
 * for those already moved. Returns how many entries are now in `to` only.
 */
export async function moveManyBetweenTiers<D extends { _id: string; version: number }>(
  ops: BatchTierOps<D>,
  sources: readonly D[],
  from: Tier,
  to: Tier,
  transform: (source: D) => D,
): Promise<number> {
  if (sources.length === 0) return 0;
  await ops.putMany(to, sources.map(transform));
  const removed = await ops.removeVersions(
    from,
    sources.map((s) => ({ id: s._id, version: s.version })),
  );
  if (removed === sources.length) return removed;
  let moved = 0;
  for (const s of sources) {
    if ((await moveBetweenTiers(ops, s._id, from, to, transform)) !== 'absent') moved++;
  }
  return moved;
}
