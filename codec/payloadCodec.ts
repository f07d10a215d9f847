import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { METADATA_ENCODING_KEY, type Payload, type PayloadCodec } from '@temporalio/common';
import { StackUnavailableError } from '../core/errors';
import { payloadKeys } from '../store/contentKeys';
import type { Store } from '../store/db';

/**
 * The payload codec of every memgate client and worker: each payload (an Update's argument,
 * an activity's input and result, a continue-as-new input, a query's answer) is encrypted
 * whole with AES-256-GCM under a key held in the store, so the Temporal server, its UI and
 * `temporal workflow show` hold only ciphertext; `memgate serve` decodes for an operator's
 * UI (`/codec/decode`). The entries a write carries are sealed again inside, each with a key
 * of its own (codec/sealedEntry.ts): that inner key is the one `forget` deletes.
 *
 * A payload written before the codec (not marked encrypted) decodes as it is, so histories
 * recorded without it still replay.
 */

export const ENCRYPTED_ENCODING = 'binary/encrypted';
export const KEY_ID_METADATA = 'encryption-key-id';

const NONCE_BYTES = 12;
const TAG_BYTES = 16;

interface EncodedPayload {
  metadata: Record<string, string>;
  data: string;
}

/** A payload as bytes, whole (metadata too: it names the encoding the data is in). */
function payloadBytes(p: Payload): Buffer {
  const metadata = Object.fromEntries(
    Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
  );
  const whole: EncodedPayload = {
    metadata,
    data: Buffer.from(p.data ?? new Uint8Array()).toString('base64'),
  };
  return Buffer.from(JSON.stringify(whole), 'utf8');
}

function payloadOf(bytes: Buffer): Payload {
  const whole = JSON.parse(bytes.toString('utf8')) as EncodedPayload;
  return {
    metadata: Object.fromEntries(
      Object.entries(whole.metadata).map(([k, v]) => [k, new Uint8Array(Buffer.from(v, 'base64'))]),
    ),
    data: new Uint8Array(Buffer.from(whole.data, 'base64')),
  };
}

const text = (s: string) => new Uint8Array(Buffer.from(s, 'utf8'));
const asString = (b: Uint8Array | null | undefined) => (b ? Buffer.from(b).toString('utf8') : undefined);

export class ContentCodec implements PayloadCodec {
  private keys: Promise<{ id: string; key: Buffer }[]> | undefined;

  constructor(private readonly store: Store) {}

  async encode(payloads: Payload[]): Promise<Payload[]> {
    const [newest] = await this.keyRing();
    return payloads.map((p) => {
      if (asString(p.metadata?.[METADATA_ENCODING_KEY]) === ENCRYPTED_ENCODING) return p;
      const nonce = randomBytes(NONCE_BYTES);
      const cipher = createCipheriv('aes-256-gcm', newest!.key, nonce);
      const body = Buffer.concat([cipher.update(payloadBytes(p)), cipher.final()]);
      return {
        metadata: { [METADATA_ENCODING_KEY]: text(ENCRYPTED_ENCODING), [KEY_ID_METADATA]: text(newest!.id) },
        data: new Uint8Array(Buffer.concat([nonce, cipher.getAuthTag(), body])),
      };
    });
  }

  async decode(payloads: Payload[]): Promise<Payload[]> {
    return Promise.all(
      payloads.map(async (p) => {
        if (asString(p.metadata?.[METADATA_ENCODING_KEY]) !== ENCRYPTED_ENCODING) return p;
        const keyId = asString(p.metadata?.[KEY_ID_METADATA]) ?? '';
        const key = await this.key(keyId);
        const bytes = Buffer.from(p.data ?? new Uint8Array());
        const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, NONCE_BYTES));
        decipher.setAuthTag(bytes.subarray(NONCE_BYTES, NONCE_BYTES + TAG_BYTES));
        return payloadOf(
          Buffer.concat([decipher.update(bytes.subarray(NONCE_BYTES + TAG_BYTES)), decipher.final()]),
        );
      }),
    );
  }

  /** The keys, newest first: read once, and again when a payload names one not held (a newer process's). */
  private keyRing(reload = false): Promise<{ id: string; key: Buffer }[]> {
    if (reload || !this.keys) {
      this.keys = payloadKeys(this.store, Date.now()).catch((err: unknown) => {
        this.keys = undefined;
        throw err;
      });
    }
    return this.keys;
  }

  private async key(id: string): Promise<Buffer> {
    const held =
      (await this.keyRing()).find((k) => k.id === id) ?? (await this.keyRing(true)).find((k) => k.id === id);
    // Payload keys are never deleted (only content keys are): a missing one is a store that
    // is not this deployment's, which no retry mends.
    if (!held)
      throw new StackUnavailableError(
        `a payload is encrypted under key ${id}, which this store does not hold`,
      );
    return held.key;
  }
}
