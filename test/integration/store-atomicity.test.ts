import { describe, expect, it } from 'vitest';
import { useTestEnv } from '../support/env';

/**
 * Single-document atomicity, which every counter and version guard of the store relies on
 * (docs/store.md, One document, one writer at a time): concurrent writers of one document
 * never lose each other's effect, on the embedded store as on MongoDB.
 */
const env = useTestEnv();
const WRITERS = 24;

interface Probe {
  _id: string;
  n?: number;
  version?: number;
  text?: string;
}

const probes = () => env.store.db.collection<Probe>('atomicity_probes');
const together = <T>(make: (i: number) => Promise<T>) =>
  Promise.all(Array.from({ length: WRITERS }, (_, i) => make(i)));

describe('one document written by many at once', () => {
  it('counts every concurrent $inc', async () => {
    await probes().insertOne({ _id: 'inc', n: 0 });
    await together(() => probes().updateOne({ _id: 'inc' }, { $inc: { n: 1 } }));
    expect((await probes().findOne({ _id: 'inc' }))?.n).toBe(WRITERS);
  });

  it('lets exactly one of the updates guarded by one version apply', async () => {
    await probes().insertOne({ _id: 'guarded', version: 0 });
    const results = await together((i) =>
      probes().updateOne({ _id: 'guarded', version: 0 }, { $inc: { version: 1 }, $set: { text: `by ${i}` } }),
    );
    const applied = results.map((r, i) => (r.modifiedCount === 1 ? i : -1)).filter((i) => i >= 0);
    expect(applied).toHaveLength(1);
    expect(await probes().findOne({ _id: 'guarded' })).toEqual({
      _id: 'guarded',
      version: 1,
      text: `by ${applied[0]}`,
    });
  });

  it('counts every concurrent upsert of one new id, and none fails', async () => {
    await together(() => probes().updateOne({ _id: 'upserted' }, { $inc: { n: 1 } }, { upsert: true }));
    expect((await probes().findOne({ _id: 'upserted' }))?.n).toBe(WRITERS);
  });

  it('hands out distinct values from a counter read and incremented in one command', async () => {
    await probes().insertOne({ _id: 'counter', n: 0 });
    const taken = await together(() =>
      probes().findOneAndUpdate({ _id: 'counter' }, { $inc: { n: 1 } }, { returnDocument: 'after' }),
    );
    expect(taken.map((d) => d?.n).sort((a, b) => a! - b!)).toEqual(
      Array.from({ length: WRITERS }, (_, i) => i + 1),
    );
  });

  it('counts every concurrent $inc of an update of many documents', async () => {
    await probes().insertMany(['many-0', 'many-1', 'many-2'].map((_id) => ({ _id, n: 0, text: 'many' })));
    await together(() => probes().updateMany({ text: 'many' }, { $inc: { n: 1 } }));
    const counts = (await probes().find({ text: 'many' }).toArray()).map((d) => d.n);
    expect(counts).toEqual([WRITERS, WRITERS, WRITERS]);
  });

  it('hands a document to exactly one of many concurrent takers', async () => {
    await probes().insertOne({ _id: 'taken', n: 1 });
    const taken = await together(() => probes().findOneAndDelete({ _id: 'taken' }));
    expect(taken.filter((d) => d !== null)).toEqual([{ _id: 'taken', n: 1 }]);
  });

  it('never deletes a document by a condition an increment landed against first', async () => {
    // As the document frequencies do: a term at zero leaves, unless counted again meanwhile.
    for (let round = 0; round < 8; round++) {
      const _id = `conditional-${round}`;
      await probes().insertOne({ _id, n: 0 });
      const [deleted, ...increments] = await Promise.all([
        probes().deleteOne({ _id, n: { $lte: 0 } }),
        ...Array.from({ length: 4 }, () => probes().updateOne({ _id }, { $inc: { n: 1 } })),
      ]);
      const counted = increments.reduce((sum, r) => sum + r.modifiedCount, 0);
      const left = await probes().findOne({ _id });
      if (deleted.deletedCount === 1) {
        expect(counted, `round ${round}`).toBe(0);
        expect(left).toBeNull();
      } else {
        expect(left?.n, `round ${round}`).toBe(counted);
      }
    }
  });
});
