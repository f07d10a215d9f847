import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { KEY_PREFIX, parseKey } from '../core/keys';
import type { ApiKeyRecord, Store } from './db';

/** The stored form of a secret: its SHA-256 digest (the secret itself is never stored). */
function digest(secret: string): Buffer {
  return createHash('sha256').update(secret).digest();
}

/** A new key for the agents the pattern covers; the returned text is the only copy of it. */
export async function createKey(
  store: Store,
  agents: string,
  now: number,
): Promise<{ keyId: string; key: string; agents: string }> {
  const keyId = randomBytes(6).toString('hex');
  const secret = randomBytes(32).toString('base64url');
  await store.apiKeys.insertOne({ _id: keyId, hash: digest(secret).toString('hex'), agents, createdAt: now });
  return { keyId, key: `${KEY_PREFIX}${keyId}_${secret}`, agents };
}

/** False when there is no such key or it was revoked already. */
export async function revokeKey(store: Store, keyId: string, now: number): Promise<boolean> {
  const res = await store.apiKeys.updateOne(
    { _id: keyId, revokedAt: { $exists: false } },
    { $set: { revokedAt: now } },
  );
  return res.modifiedCount === 1;
}

/** Every key, without its digest. */
export async function listKeys(store: Store): Promise<Omit<ApiKeyRecord, 'hash'>[]> {
  const keys = await store.apiKeys
    .find({}, { projection: { hash: 0 } })
    .sort({ _id: 1 })
    .toArray();
  return keys as Omit<ApiKeyRecord, 'hash'>[];
}

/** The scope of a live key, or undefined for anything else (unknown, revoked, malformed). */
export async function authenticate(
  store: Store,
  key: string,
): Promise<{ keyId: string; agents: string } | undefined> {
  const parsed = parseKey(key);
  if (!parsed) return undefined;
  const record = await store.apiKeys.findOne({ _id: parsed.keyId });
  if (!record || record.revokedAt !== undefined) return undefined;
  const stored = Buffer.from(record.hash, 'hex');
  const given = digest(parsed.secret);
  return stored.length === given.length && timingSafeEqual(stored, given)
    ? { keyId: record._id, agents: record.agents }
    : undefined;
}
