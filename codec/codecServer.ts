import { METADATA_ENCODING_KEY, type Payload } from '@temporalio/common';
import { parseWriteRequest, type WriteLimits, type WriteRequest } from '../core/entry';
import { InvalidInputError, MemgateError } from '../core/errors';
import { isSealedWrite } from '../core/sealed';
import { contentKeys } from '../store/contentKeys';
import type { Store } from '../store/db';
import type { ContentCodec } from './payloadCodec';
import { openEntry, sealWrite } from './sealedEntry';

/**
 * Temporal's codec-server protocol (`POST /codec/encode`, `/codec/decode`): payloads as JSON,
 * each metadata value and the data in base64, so that an operator's Temporal UI or CLI shows
 * what memgate encrypted (docs/erasure.md, Reading histories).
 */
export interface WirePayload {
  metadata?: Record<string, string>;
  data?: string;
}

function fromWire(p: WirePayload): Payload {
  return {
    metadata: Object.fromEntries(
      Object.entries(p.metadata ?? {}).map(([k, v]) => [k, new Uint8Array(Buffer.from(v, 'base64'))]),
    ),
    data: new Uint8Array(Buffer.from(p.data ?? '', 'base64')),
  };
}

function toWire(p: Payload): WirePayload {
  return {
    metadata: Object.fromEntries(
      Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
    ),
    data: Buffer.from(p.data ?? new Uint8Array()).toString('base64'),
  };
}

/**
 * Encoded as memgate's own clients encode: a write in clear (another language's Temporal SDK
 * sends one) is refused unless `inScope` accepts the agent it names, then sealed, each entry
 * under its key; its `writtenAt` is fixed here when it has none, as memgate's client fixes it.
 * A write that does not parse is left as it is, for the workflow's validator to refuse, typed.
 */
export async function encodeForWire(
  codec: ContentCodec,
  store: Store,
  payloads: WirePayload[],
  opts: { limits: WriteLimits; inScope: (agentId: string) => void },
): Promise<WirePayload[]> {
  const sealed = await Promise.all(
    payloads.map(async (wire) => {
      const p = fromWire(wire);
      const value = jsonOf(p);
      if (value === undefined || !isWriteInClear(value)) return p;
      // The agent a write names is judged before the write is: an invalid write for an agent
      // out of the key's scope is that agent's too, and not the caller's to encode.
      opts.inScope((value as { agentId: string }).agentId);
      const now = Date.now();
      let write: WriteRequest;
      try {
        write = parseWriteRequest(value, opts.limits, now);
      } catch {
        return p;
      }
      for (const e of write.entries) e.writtenAt ??= now;
      const data = JSON.stringify(await sealWrite(store, write.agentId, write.entries));
      return { ...p, data: new Uint8Array(Buffer.from(data, 'utf8')) };
    }),
  );
  return (await codec.encode(sealed)).map(toWire);
}

/** A payload's JSON value, when it is JSON. */
export function jsonOf(p: Payload): unknown {
  if (Buffer.from(p.metadata?.[METADATA_ENCODING_KEY] ?? []).toString() !== 'json/plain') return undefined;
  try {
    return JSON.parse(Buffer.from(p.data ?? new Uint8Array()).toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}

function isWriteInClear(value: unknown): boolean {
  const v = value as { agentId?: unknown; entries?: unknown } | null;
  return (
    typeof v?.agentId === 'string' &&
    Array.isArray(v.entries) &&
    v.entries.some((e) => typeof (e as { text?: unknown } | null)?.text === 'string')
  );
}

/** A sealed entry as the UI shows it: what it holds, or that it was erased. */
type ShownEntry = { id: string; erased: true } | ({ id: string } & Record<string, unknown>);

/**
 * Decoded; with `openEntries` (a key over every agent), each write's sealed entries opened
 * too where their key is still held, an erased one shown as `{ id, erased: true }`. For
 * reading only: what the UI shows is not what the workflow took, which stays sealed.
 */
export async function decodeForWire(
  codec: ContentCodec,
  store: Store,
  payloads: WirePayload[],
  opts: { openEntries: boolean },
): Promise<WirePayload[]> {
  const decoded = await Promise.all(
    payloads.map(async (p, i) => {
      try {
        return (await codec.decode([fromWire(p)]))[0]!;
      } catch (err) {
        if (err instanceof MemgateError) throw err;
        // Altered, truncated or another deployment's: the caller's input, not a failure here.
        throw new InvalidInputError('a payload does not decode', [
          { path: `payloads.${i}`, message: 'not a payload this deployment encrypted' },
        ]);
      }
    }),
  );
  if (!opts.openEntries) return decoded.map(toWire);
  return Promise.all(
    decoded.map(async (p) => {
      const value = jsonOf(p);
      if (value === undefined) return toWire(p);
      const shown = await openWrites(store, value);
      return toWire({ ...p, data: new Uint8Array(Buffer.from(JSON.stringify(shown), 'utf8')) });
    }),
  );
}

/** The value with every sealed write in it opened (an Update's argument, a batch of them). */
async function openWrites(store: Store, value: unknown): Promise<unknown> {
  if (Array.isArray(value)) return Promise.all(value.map((v) => openWrites(store, v)));
  if (value === null || typeof value !== 'object') return value;
  if (isSealedWrite(value)) {
    const write = value;
    const keys = await contentKeys(
      store,
      write.agentId,
      write.entries.map((e) => e.id),
    );
    const entries: ShownEntry[] = write.entries.map((e) => {
      const key = keys.get(e.id);
      const opened = key ? openEntry(write.agentId, e.id, e.sealed, key) : undefined;
      return opened && typeof opened === 'object'
        ? { id: e.id, ...(opened as object) }
        : { id: e.id, erased: true };
    });
    return { ...value, entries };
  }
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = await openWrites(store, v);
  return out;
}
