import { randomBytes, randomUUID } from 'node:crypto';
import { Binary } from 'mongodb';
import { ConflictError } from '../core/errors';
import { findByIds } from './byIds';
import { insertIgnoringExisting, type ContentKeyRecord, type Store } from './db';

/**
 * The keys memory content is encrypted with before it reaches Temporal (codec/): one per entry,
 * which `forget` deletes first (docs/invariants.md, Erased from Temporal history), and the
 * payload codec's, which encrypt every payload whole.
 */

/** AES-256 keys. */
export const KEY_BYTES = 32;

/**
 * Tries at an entry's key: one forget deletes it at most twice (store/forget.ts), so a key is
 * had by the third, whoever else sends the entry meanwhile.
 */
const KEY_ROUNDS = 3;

/**
 * The content key of each entry id, created for the ids that have none: a resent write finds
 * the key its first send created, so every copy of one entry is under one key.
 */
export async function contentKeysFor(
  store: Store,
  agentId: string,
  ids: readonly string[],
  now: number,
): Promise<Map<string, Buffer>> {
  const keys = new Map<string, Buffer>();
  // A key found existing and deleted (by forget) before it is read is made anew, as it is for
  // a write sent just after the delete: forget deletes the key again once its tombstone stands,
  // and a persist after that answers the entry erased and deletes the key it brought.
  let missing = [...new Set(ids)];
  for (let round = 0; missing.length > 0; round++) {
    if (round === KEY_ROUNDS) {
      throw new ConflictError(
        `the content keys of entries ${missing.join(', ')} were deleted as they were made: they are being erased`,
        { agentId, ids: missing },
      );
    }
    const fresh: ContentKeyRecord[] = missing.map((_id) => ({
      _id,
      agentId,
      key: new Binary(randomBytes(KEY_BYTES)),
      createdAt: now,
    }));
    const existing = await insertIgnoringExisting(store.contentKeys, fresh);
    for (const r of fresh) if (!existing.has(r._id)) keys.set(r._id, Buffer.from(r.key.value()));
    if (existing.size > 0)
      for (const [id, key] of await contentKeys(store, agentId, [...existing])) keys.set(id, key);
    missing = missing.filter((id) => !keys.has(id));
  }
  return keys;
}

/** The content keys of the ids that still have one (of this agent): an id without is erased. */
export async function contentKeys(
  store: Store,
  agentId: string,
  ids: readonly string[],
): Promise<Map<string, Buffer>> {
  const found = await findByIds(store.contentKeys, ids);
  return new Map(
    [...found.values()].flatMap((r) =>
      r.agentId === agentId ? [[r._id, Buffer.from(r.key.value())] as const] : [],
    ),
  );
}

/** Delete an entry's content key: every copy of its content sealed under it is unreadable from now on. */
export async function shredContentKey(store: Store, agentId: string, id: string): Promise<void> {
  await store.contentKeys.deleteOne({ _id: id, agentId });
}

/** Delete every content key of an agent (erasing the whole agent). */
export async function shredAgentContentKeys(store: Store, agentId: string): Promise<number> {
  return (await store.contentKeys.deleteMany({ agentId })).deletedCount;
}

/**
 * The payload codec's keys, newest first, creating the first when there is none. Two
 * processes starting at once may both create one: both are kept, and the newest encodes.
 */
export async function payloadKeys(store: Store, now: number): Promise<{ id: string; key: Buffer }[]> {
  let records = await store.payloadKeys.find({}).toArray();
  if (records.length === 0) {
    await store.payloadKeys.insertOne({
      _id: randomUUID(),
      key: new Binary(randomBytes(KEY_BYTES)),
      createdAt: now,
    });
    records = await store.payloadKeys.find({}).toArray();
  }
  return records
    .sort((a, b) => b.createdAt - a.createdAt || a._id.localeCompare(b._id))
    .map((r) => ({ id: r._id, key: Buffer.from(r.key.value()) }));
}
