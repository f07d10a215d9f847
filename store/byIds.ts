import DataLoader from 'dataloader';
import type { Collection, Document, Filter } from 'mongodb';

/**
 * The most ids one read asks for: the stack's FerretDB serves `_id: {$in}` of strings from the
 * `_id` index up to this many (stack/ferretdb/id-in-from-index.patch), and scans for more.
 */
export const IDS_PER_READ = 1_000;

/**
 * The documents of these ids, by id (an id not stored is absent): `_id: {$in}` alone, one read
 * per IDS_PER_READ ids (docs/invariants.md, Index-driven). Ten ids in one read take a tenth of
 * ten point reads' time on FerretDB, whose cost is mostly per command (docs/store.md, Many by
 * id in one read). Callers check the agent of what they read, as after a point read.
 */
export async function findByIds<T extends Document & { _id: string }>(
  collection: Collection<T>,
  ids: readonly string[],
  projection?: Document,
): Promise<Map<string, T>> {
  const distinct = [...new Set(ids)];
  const found = new Map<string, T>();
  for (let i = 0; i < distinct.length; i += IDS_PER_READ) {
    const filter = { _id: { $in: distinct.slice(i, i + IDS_PER_READ) } } as Filter<T>;
    const docs = await collection.find(filter, projection ? { projection } : {}).toArray();
    for (const doc of docs) found.set(doc._id, doc as T);
  }
  return found;
}

/**
 * Reads by `_id` that one call makes side by side, as they are asked for (a recall's reads of
 * its neighbours), gathered into one `findByIds` per tick; each id is read once. Made per
 * call, so nothing is cached past it.
 */
export function idLoader<T extends Document & { _id: string }>(
  collection: Collection<T>,
  projection?: Document,
): DataLoader<string, T | undefined> {
  return new DataLoader(
    async (ids) => {
      const found = await findByIds(collection, ids, projection);
      return ids.map((id) => found.get(id));
    },
    { maxBatchSize: IDS_PER_READ },
  );
}
