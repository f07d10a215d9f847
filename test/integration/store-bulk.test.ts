import { randomUUID } from 'node:crypto';
import { MongoClient, type AnyBulkWriteOperation, type Collection } from 'mongodb';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { parseConfig } from '../../core/config';
import { createGuard, storeLimitsOf } from '../../store/guard';

/**
 * A bulk write through the guard (store/guard.ts): an unordered one is sent as small commands a
 * few at a time, within the process's budget (docs/invariants.md, No store wedge); an ordered
 * one, one command after another. Counted at the driver's collection the guard wraps.
 */
const uri = inject('mongoUri');
const limits = storeLimitsOf(parseConfig({}));
let client: MongoClient;
let raw: Collection<{ _id: string; n: number }>;

beforeAll(async () => {
  client = new MongoClient(uri);
  await client.connect();
  raw = client.db(`test_bulk_${randomUUID().slice(0, 8)}`).collection('docs');
  await raw.insertMany(Array.from({ length: 60 }, (_, i) => ({ _id: `d${i}`, n: 0 })));
});
afterAll(async () => {
  await raw.drop().catch(() => undefined);
  await client.close();
});

/** The wrapped collection, counting the commands at the server at once and their statements. */
function counted() {
  const seen = { most: 0, inFlight: 0, largest: 0, commands: 0 };
  const target = new Proxy(raw, {
    get(t, prop, receiver) {
      const value: unknown = Reflect.get(t, prop, receiver);
      if (prop !== 'bulkWrite') return typeof value === 'function' ? value.bind(t) : value;
      return async (ops: AnyBulkWriteOperation<{ _id: string; n: number }>[], options: object) => {
        seen.commands++;
        seen.largest = Math.max(seen.largest, ops.length);
        seen.most = Math.max(seen.most, ++seen.inFlight);
        try {
          return await t.bulkWrite(ops, options);
        } finally {
          seen.inFlight--;
        }
      };
    },
  });
  return { seen, collection: createGuard(uri, limits).collection(target) };
}

const updates = (n: number, from = 0) =>
  Array.from({ length: n }, (_, i) => ({
    updateOne: { filter: { _id: `d${from + i}` }, update: { $inc: { n: 1 } } },
  }));

describe('a bulk write through the guard', () => {
  it('unordered: in commands of the budget’s size, more than one and at most its number at once', async () => {
    const { seen, collection } = counted();
    const res = await collection.bulkWrite(updates(60), { ordered: false });
    expect(res.modifiedCount).toBe(60);
    const { statements, inFlight } = limits.budget.unordered;
    expect(seen.largest).toBeLessThanOrEqual(statements);
    expect(seen.commands).toBe(Math.ceil(60 / statements));
    expect(seen.most).toBeGreaterThan(1);
    expect(seen.most).toBeLessThanOrEqual(inFlight);
  });

  it('ordered: one command at a time, in the caller’s order', async () => {
    const { seen, collection } = counted();
    const res = await collection.bulkWrite(updates(60), { ordered: true });
    expect(res.modifiedCount).toBe(60);
    expect(seen.most).toBe(1);
    expect(seen.largest).toBeLessThanOrEqual(limits.budget.updatesPerCommand);
  });

  it('unordered: a failing command does not stop the others, and its failure is thrown', async () => {
    const { collection } = counted();
    const ops = [...updates(20), { insertOne: { document: { _id: 'd0', n: 0 } } }, ...updates(20, 20)];
    await expect(collection.bulkWrite(ops, { ordered: false })).rejects.toThrow();
    // Every other statement was applied: once each here, after once in each test before.
    const docs = await raw.find({}).toArray();
    const n = new Map(docs.map((d) => [d._id, d.n]));
    expect(n.get('d5')).toBe(3);
    expect(n.get('d25')).toBe(3);
  });
});
