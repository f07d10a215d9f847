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
  /** Told of each move this call finished, with the source it removed and the copy it put. */
  moved?(from: Tier, to: Tier, moves: { source: D; target: D }[]): Promise<void>;
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
    const target = transform(source);
    await ops.put(to, target);
    if (await ops.removeVersion(from, id, source.version)) {
      await ops.moved?.(from, to, [{ source, target }]);
      return 'moved';
    }
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
  const moves = sources.map((source) => ({ source, target: transform(source) }));
  await ops.putMany(
    to,
    moves.map((m) => m.target),
  );
  const removed = await ops.removeVersions(
    from,
    sources.map((s) => ({ id: s._id, version: s.version })),
  );
  if (removed === sources.length) {
    await ops.moved?.(from, to, moves);
    return removed;
  }
  let moved = 0;
  // The batch's deletes that matched left these already moved: told here, as their moves end.
  const byBatch: { source: D; target: D }[] = [];
  for (const m of moves) {
    const outcome = await moveBetweenTiers(ops, m.source._id, from, to, transform);
    if (outcome !== 'absent') moved++;
    if (outcome === 'already-moved') byBatch.push(m);
  }
  await ops.moved?.(from, to, byBatch);
  return moved;
}
