import { randomBytes, randomUUID } from 'node:crypto';
import { Binary } from 'mongodb';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { openSealedWrite, sealWrite } from '../../codec/sealedEntry';
import { parseConfig } from '../../core/config';
import { parseWriteRequest, type WriteEntry } from '../../core/entry';
import { ConflictError } from '../../core/errors';
import { policyOf, writeLimitsOf } from '../../core/policy';
import { contentKeys, contentKeysFor, KEY_BYTES, shredContentKey } from '../../store/contentKeys';
import { ensureIndexes, insertIgnoringExisting, openStore, type Store } from '../../store/db';
import { storeLimitsOf } from '../../store/guard';

/**
 * An entry's content key as a write seals under it (store/contentKeys.ts), while forget
 * deletes the key between the store calls that find it.
 */
const config = parseConfig({});
const limits = writeLimitsOf(policyOf(config));
let store: Store;
beforeAll(async () => {
  store = await openStore(
    inject('mongoUri'),
    `test_content_keys_${randomUUID().slice(0, 8)}`,
    storeLimitsOf(config),
  );
  await ensureIndexes(store);
});
afterAll(async () => {
  await store?.db.dropDatabase();
  await store?.close();
});

/** The store, with `around` run about each insert of content keys (up to `times` of them). */
function racing(around: (insert: () => Promise<unknown>) => Promise<unknown>, times: number): Store {
  let left = times;
  return {
    ...store,
    contentKeys: new Proxy(store.contentKeys, {
      get(target, prop, receiver) {
        const value: unknown = Reflect.get(target, prop, receiver);
        if (typeof value !== 'function') return value;
        const bound = (value as (...a: unknown[]) => unknown).bind(target);
        if (prop !== 'insertMany') return bound;
        return (...args: unknown[]) => (left-- > 0 ? around(async () => bound(...args)) : bound(...args));
      },
    }),
  };
}

function entriesOf(agentId: string, text: string): WriteEntry[] {
  const now = Date.now();
  return parseWriteRequest({ agentId, entries: [{ text, writtenAt: now }] }, limits, now).entries;
}

describe('sealing a write whose key forget deletes meanwhile', () => {
  it('seals it under a key made anew, which the store holds, as a send just after the delete would', async () => {
    const agentId = 'content-keys-1';
    const entries = entriesOf(agentId, 'Resent while erased.');
    const id = (await sealWrite(store, agentId, entries)).entries[0]!.id;
    // Found existing by the insert, deleted before it is read.
    const again = await sealWrite(
      racing(async (insert) => {
        try {
          return await insert();
        } finally {
          await shredContentKey(store, agentId, id);
        }
      }, 1),
      agentId,
      entries,
    );
    const keys = await contentKeys(store, agentId, [id]);
    expect(keys.has(id)).toBe(true);
    expect(openSealedWrite(again, keys, limits, Date.now())).toMatchObject({
      write: { entries: [{ text: 'Resent while erased.' }] },
      erased: [],
    });
    expect([...(await contentKeysFor(store, agentId, [id], Date.now()))]).toEqual([...keys]);
  });

  it('fails typed (Conflict) when its key is made and deleted again at every try', async () => {
    const agentId = 'content-keys-2';
    const entries = entriesOf(agentId, 'Erased over and over.');
    const id = (await sealWrite(store, agentId, entries)).entries[0]!.id;
    // Another sender makes the key before each insert, and forget deletes it before each read.
    const sent = sealWrite(
      racing(async (insert) => {
        await insertIgnoringExisting(store.contentKeys, [
          { _id: id, agentId, key: new Binary(randomBytes(KEY_BYTES)), createdAt: Date.now() },
        ]);
        try {
          return await insert();
        } finally {
          await shredContentKey(store, agentId, id);
        }
      }, Infinity),
      agentId,
      entries,
    );
    await expect(sent).rejects.toBeInstanceOf(ConflictError);
  });
});
