import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { parseOpenedWrite, type WriteEntry, type WriteLimits, type WriteRequest } from '../core/entry';
import { InvalidInputError } from '../core/errors';
import type { SealedWrite } from '../core/sealed';
import { contentKeysFor } from '../store/contentKeys';
import type { Store } from '../store/db';
import { writtenEntryId } from '../store/entries';

/**
 * AES-256-GCM over one entry's JSON, bound to its agent and id (the additional data), so a
 * sealed entry opens only as the entry it was sealed as. The nonce is random per sealing.
 */

const NONCE_BYTES = 12;
const TAG_BYTES = 16;

function additionalData(agentId: string, id: string): Buffer {
  return Buffer.from(`${agentId}\0${id}`, 'utf8');
}

/** Base64 of nonce, tag and ciphertext. */
export function sealEntry(agentId: string, id: string, entry: unknown, key: Buffer): string {
  const nonce = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, nonce);
  cipher.setAAD(additionalData(agentId, id));
  const body = Buffer.concat([cipher.update(JSON.stringify(entry), 'utf8'), cipher.final()]);
  return Buffer.concat([nonce, cipher.getAuthTag(), body]).toString('base64');
}

/** The entry a sealing holds, or undefined when it does not open with `key` (altered, or another entry's). */
export function openEntry(agentId: string, id: string, sealed: string, key: Buffer): unknown {
  const bytes = Buffer.from(sealed, 'base64');
  if (bytes.length < NONCE_BYTES + TAG_BYTES) return undefined;
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, NONCE_BYTES));
    decipher.setAAD(additionalData(agentId, id));
    decipher.setAuthTag(bytes.subarray(NONCE_BYTES, NONCE_BYTES + TAG_BYTES));
    const json = Buffer.concat([decipher.update(bytes.subarray(NONCE_BYTES + TAG_BYTES)), decipher.final()]);
    return JSON.parse(json.toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * A write as the client sends it: each entry (its `writtenAt` fixed) sealed under its own
 * content key, named by the id the entry derives, which a resend derives again.
 */
export async function sealWrite(
  store: Store,
  agentId: string,
  entries: readonly WriteEntry[],
): Promise<SealedWrite> {
  const ids = entries.map((e) => writtenEntryId(agentId, { ...e, writtenAt: e.writtenAt! }));
  const keys = await contentKeysFor(store, agentId, ids, Date.now());
  return {
    agentId,
    entries: entries.map((e, i) => ({
      id: ids[i]!,
      sealed: sealEntry(agentId, ids[i]!, e, keys.get(ids[i]!)!),
    })),
  };
}

/**
 * The entries of a sealed write in clear, checked as a write in clear is but for bytes, which
 * the workflow checked sealed (the client checked them before sealing; a caller of the
 * Temporal API may not have); `erased`, the ids whose key is gone. An entry that does not open
 * under its key, or opens as another id, is refused.
 */
export function openSealedWrite(
  write: SealedWrite,
  keys: ReadonlyMap<string, Buffer>,
  limits: WriteLimits,
  now: number,
): { write: WriteRequest; erased: string[] } {
  const erased: string[] = [];
  const opened: unknown[] = [];
  const ids: string[] = [];
  write.entries.forEach((e, i) => {
    const key = keys.get(e.id);
    if (!key) {
      erased.push(e.id);
      return;
    }
    const entry = openEntry(write.agentId, e.id, e.sealed, key);
    if (entry === undefined) {
      throw new InvalidInputError('invalid write', [
        { path: `entries.${i}.sealed`, message: 'does not open under the key of its id' },
      ]);
    }
    opened.push(entry);
    ids.push(e.id);
  });
  if (opened.length === 0) return { write: { agentId: write.agentId, entries: [] }, erased };
  const clear = parseOpenedWrite({ agentId: write.agentId, entries: opened }, limits, now);
  clear.entries.forEach((e, i) => {
    const derived =
      e.writtenAt === undefined ? undefined : writtenEntryId(write.agentId, { ...e, writtenAt: e.writtenAt });
    if (derived !== ids[i]) {
      throw new InvalidInputError('invalid write', [
        {
          path: `entries.${i}.id`,
          message: 'is not the id its sealed entry derives (writtenAt fixed before sealing)',
        },
      ]);
    }
  });
  return { write: clear, erased };
}
