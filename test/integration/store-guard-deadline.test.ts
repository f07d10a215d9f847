import { randomUUID } from 'node:crypto';
import { MongoClient, type Collection } from 'mongodb';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { StackUnavailableError } from '../../core/errors';
import { parseConfig } from '../../core/config';
import { createGuard, storeLimitsOf, type StoreLimits } from '../../store/guard';

/**
 * A read past its deadline through the guard (store/guard.ts): the caller has its
 * `StackUnavailable`, but the server may still be running the read on its connection, so the
 * read's unit of the process's budget is given back only once the server is done
 * (docs/invariants.md, No store wedge). The server is the stack's; its answers to reads are
 * held back here, as a stalled server's would be, at the driver's cursor the guard wraps.
 */
const uri = inject('mongoUri');
const limits: StoreLimits = { ...storeLimitsOf(parseConfig({})), timeoutMs: 300 };
let client: MongoClient;
let raw: Collection<{ _id: string }>;

beforeAll(async () => {
  client = new MongoClient(uri);
  await client.connect();
  raw = client.db(`test_deadline_${randomUUID().slice(0, 8)}`).collection('docs');
  await raw.insertMany([{ _id: 'd0' }, { _id: 'd1' }]);
});
afterAll(async () => {
  await raw.drop().catch(() => undefined);
  await client.close();
});

/**
 * The wrapped collection: the batches of a `find` wait for `answer` (a stalled server), and
 * every call the guard sends on counts as in flight at the server until it settles.
 */
function stalled() {
  const seen = { inFlight: 0, most: 0 };
  let answer!: () => void;
  const answered = new Promise<void>((r) => (answer = r));
  const track = async <T>(call: () => Promise<T>): Promise<T> => {
    seen.most = Math.max(seen.most, ++seen.inFlight);
    try {
      return await call();
    } finally {
      seen.inFlight--;
    }
  };
  const heldCursor = <C extends { next(): Promise<unknown>; clone(): C }>(cursor: C): C =>
    new Proxy(cursor, {
      get(t, prop, receiver) {
        const value: unknown = Reflect.get(t, prop, receiver);
        if (prop === 'next') return () => track(async () => (await answered, t.next()));
        if (prop === 'clone') return () => heldCursor(t.clone());
        return typeof value === 'function' ? (value as () => unknown).bind(t) : value;
      },
    });
  const target = new Proxy(raw, {
    get(t, prop, receiver) {
      const value: unknown = Reflect.get(t, prop, receiver);
      if (prop === 'find') return (...args: Parameters<typeof t.find>) => heldCursor(t.find(...args));
      if (prop === 'findOne')
        return (...args: Parameters<typeof t.findOne>) => track(() => t.findOne(...args));
      return typeof value === 'function' ? (value as () => unknown).bind(t) : value;
    },
  });
  return { seen, answer, collection: createGuard(uri, limits).collection(target) };
}

describe('a read past its deadline', () => {
  it('holds its unit until the server is done with it: no more calls reach the server at once than the budget admits', async () => {
    const { seen, answer, collection } = stalled();
    const { commands } = limits.budget;
    try {
      // Every command unit taken by a read the server does not answer in time.
      const reads = await Promise.allSettled(
        Array.from({ length: commands }, () => collection.find({}).toArray()),
      );
      for (const r of reads) {
        expect(r).toMatchObject({ status: 'rejected', reason: expect.any(StackUnavailableError) });
      }
      // The server still runs them: a point read waits for a unit, and is refused in time.
      await expect(collection.findOne({ _id: 'd0' })).rejects.toThrow(/store connections were all in use/);
      expect(seen.most).toBeLessThanOrEqual(commands);
    } finally {
      answer();
    }
    // Once the server is done, the units are back.
    await expect(collection.findOne({ _id: 'd1' })).resolves.toEqual({ _id: 'd1' });
  });

  it('read a batch at a time: holds its unit of the cursors’ pool until the server is done with the batch, though closed', async () => {
    const { seen, answer, collection } = stalled();
    const { cursors } = limits.budget;
    const iterate = async () => {
      const ids: string[] = [];
      for await (const doc of collection.find({})) ids.push(doc._id);
      return ids;
    };
    try {
      const reads = await Promise.allSettled(Array.from({ length: cursors }, iterate));
      for (const r of reads) {
        expect(r).toMatchObject({ status: 'rejected', reason: expect.any(StackUnavailableError) });
      }
      await expect(iterate()).rejects.toThrow(/store connections were all in use/);
      expect(seen.most).toBeLessThanOrEqual(cursors);
    } finally {
      answer();
    }
    await expect(iterate()).resolves.toEqual(['d0', 'd1']);
  });
});
