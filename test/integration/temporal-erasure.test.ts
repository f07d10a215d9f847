import { METADATA_ENCODING_KEY, type Payload } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpServer, type RunningServer } from '../../cli/commands/serve';
import { ContentCodec, ENCRYPTED_ENCODING } from '../../codec/payloadCodec';
import { openEntry } from '../../codec/sealedEntry';
import { contentKeys } from '../../store/contentKeys';
import { createKey } from '../../store/keys';
import { agentMemoryWorkflowId } from '../../workflows/agentMemory';
import { interleaveOnce } from '../support/faults';
import { useTestEnv } from '../support/env';

/**
 * Erased from Temporal history (docs/invariants.md): after `forget`, the agent workflow's
 * whole history, read through the Temporal API, holds nothing of the erased entry that can be
 * read (its text or its atoms), and the other entries still decode.
 */

const env = useTestEnv();

const ERASED = 'Dr. Imogen Vasquez-Thorne will be paid "Project Halcyon" fees of $48,213.77 on 2031-04-17.';
const ATOMS = ['Imogen', 'Vasquez-Thorne', 'Halcyon', '48,213.77', '2031-04-17'];
const KEPT = [
  'The quarterly review moved to the blue meeting room.',
  'Lunch orders close at eleven on Fridays.',
];

/** Every payload a history holds, wherever in its events. */
function payloadsIn(value: unknown): Payload[] {
  if (value === null || typeof value !== 'object' || value instanceof Uint8Array) return [];
  const v = value as Record<string, unknown>;
  if (v.data instanceof Uint8Array && v.metadata !== null && typeof v.metadata === 'object')
    return [v as Payload];
  return (Array.isArray(value) ? value : Object.values(v)).flatMap(payloadsIn);
}

const utf8 = (b: Uint8Array | null | undefined) => Buffer.from(b ?? new Uint8Array()).toString('utf8');

async function agentHistory(agentId: string) {
  return env.client.temporal.workflow.getHandle(agentMemoryWorkflowId(agentId)).fetchHistory();
}

describe("an erased entry in the agent workflow's Temporal history", () => {
  const agentId = 'temporal-erasure';
  let ids: string[] = [];

  beforeAll(async () => {
    const agent = env.agent(agentId);
    const first = await env.client.write({
      agentId: agent,
      entries: [{ text: KEPT[0]! }, { text: ERASED, kind: 'fact' }],
    });
    const second = await env.client.write({ agentId: agent, entries: [{ text: KEPT[1]! }] });
    ids = [...first.entries, ...second.entries].map((e) => e.id);
    await env.client.forget({ agentId: agent, entryId: ids[1]! });
  });

  it('is held only as ciphertext: no payload of the history holds content in clear', async () => {
    const history = await agentHistory(env.agent(agentId));
    const payloads = payloadsIn(history);
    expect(payloads.length).toBeGreaterThan(3);
    // In clear only what the SDK writes itself: beside a local activity's result its type,
    // attempt and times; for a patch (docs/versioning.md) its marker and the run's list of
    // patches, which hold the patch's name.
    const clear = payloads.filter((p) => utf8(p.metadata?.[METADATA_ENCODING_KEY]) !== ENCRYPTED_ENCODING);
    const patchName = /^[a-z]+(-[a-z]+)*$/;
    for (const p of clear) {
      const value = JSON.parse(utf8(p.data)) as unknown;
      if (Array.isArray(value)) {
        for (const name of value) expect(name).toMatch(patchName);
      } else if ('activity_type' in (value as object)) {
        continue;
      } else {
        expect(value).toEqual({ id: expect.stringMatching(patchName), deprecated: false });
      }
    }
    expect(payloads.length - clear.length).toBeGreaterThan(3);
    const raw = JSON.stringify(history, (_, v: unknown) => (v instanceof Uint8Array ? utf8(v) : v));
    for (const text of [ERASED, ...KEPT, ...ATOMS]) expect(raw).not.toContain(text);
  });

  it('decodes, but the erased entry does not open, and the others do', async () => {
    const agent = env.agent(agentId);
    const decoded = await new ContentCodec(env.store).decode(payloadsIn(await agentHistory(agent)));
    const clear = decoded.map((p) => utf8(p.data)).join('\n');
    for (const atom of [ERASED, ...ATOMS]) expect(clear).not.toContain(atom);
    const sealed = decoded.flatMap((p) => {
      if (utf8(p.metadata?.[METADATA_ENCODING_KEY]) !== 'json/plain') return [];
      const value = JSON.parse(utf8(p.data)) as unknown;
      const writes = (Array.isArray(value) ? value : [value]) as {
        entries?: { id: string; sealed?: string }[];
      }[];
      return writes.flatMap((w) =>
        Array.isArray(w?.entries) ? w.entries.filter((e) => typeof e?.sealed === 'string') : [],
      );
    });
    expect(new Set(sealed.map((e) => e.id))).toEqual(new Set(ids));
    const keys = await contentKeys(env.store, agent, ids);
    expect(keys.has(ids[1]!)).toBe(false);
    for (const e of sealed) {
      const key = keys.get(e.id);
      const opened = key && (openEntry(agent, e.id, e.sealed!, key) as { text: string } | undefined);
      if (e.id === ids[1]) expect(opened).toBeUndefined();
      else expect(opened).toMatchObject({ text: KEPT[e.id === ids[0] ? 0 : 1] });
    }
  });

  it('memgate verify reads the histories and finds nothing erased readable', async () => {
    const report = await env.client.verify({ agentId: env.agent(agentId) });
    expect(report.findings.filter((f) => f.check === 'erased-in-temporal-history')).toEqual([]);
  });

  describe('through the codec endpoint', () => {
    let server: RunningServer;
    beforeAll(async () => {
      server = await startHttpServer(env.client, env.config, { port: 0 });
    });
    afterAll(async () => {
      await server?.close();
    });

    it("opens the kept entries and marks the erased one for a key over every agent, as Temporal's UI calls it; a narrower key sees them sealed", async () => {
      const agent = env.agent(agentId);
      const wire = payloadsIn(await agentHistory(agent)).map((p) => ({
        metadata: Object.fromEntries(
          Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
        ),
        data: Buffer.from(p.data ?? new Uint8Array()).toString('base64'),
      }));
      const decode = (key: string) =>
        fetch(`${server.url}/codec/decode`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            authorization: `Bearer ${key}`,
            'x-namespace': env.config.temporalNamespace,
            origin: `http://localhost:${env.config.temporalUiPort}`,
          },
          body: JSON.stringify({ payloads: wire }),
        });
      const shownBy = async (res: Response) =>
        ((await res.json()) as { payloads: { data: string }[] }).payloads
          .map((p) => Buffer.from(p.data, 'base64').toString('utf8'))
          .join('\n');
      // A key of this agent only decodes the payload layer: every entry stays sealed.
      const narrow = await decode((await createKey(env.store, agent, Date.now())).key);
      expect(narrow.status).toBe(200);
      const sealedOnly = await shownBy(narrow);
      for (const text of [...KEPT, ERASED, ...ATOMS]) expect(sealedOnly).not.toContain(text);
      expect(sealedOnly).toContain('"sealed":');
      expect((await decode('not-a-key')).status).toBe(401);
      const res = await decode((await createKey(env.store, '*', Date.now())).key);
      expect(res.status).toBe(200);
      expect(res.headers.get('access-control-allow-origin')).toBe(
        `http://localhost:${env.config.temporalUiPort}`,
      );
      const shown = await shownBy(res);
      for (const text of KEPT) expect(shown).toContain(text);
      for (const atom of [ERASED, ...ATOMS]) expect(shown).not.toContain(atom);
      expect(shown).toContain(`{"id":"${ids[1]}","erased":true}`);
    });

    it("refuses to encode another agent's write for a narrower key, whether or not the write is valid", async () => {
      const key = (await createKey(env.store, env.agent(agentId), Date.now())).key;
      const other = env.agent('codec-other');
      const encode = (write: object) =>
        fetch(`${server.url}/codec/encode`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
          body: JSON.stringify({
            payloads: [
              {
                metadata: { [METADATA_ENCODING_KEY]: Buffer.from('json/plain').toString('base64') },
                data: Buffer.from(JSON.stringify(write)).toString('base64'),
              },
            ],
          }),
        });
      for (const entries of [[{ text: 'The gate code is 9182.' }], [{ text: '' }]]) {
        const res = await encode({ agentId: other, entries });
        expect([entries[0]!.text, res.status]).toEqual([entries[0]!.text, 403]);
        expect(((await res.json()) as { error: { type: string } }).error.type).toBe('Forbidden');
      }
    });

    it('passes a write whose entries are not all sealed entries through unopened, as it came', async () => {
      const key = (await createKey(env.store, '*', Date.now())).key;
      const values = [
        { agentId: 'a', entries: [null] },
        { agentId: 'a', entries: ['x'] },
        { agentId: 'a', entries: [{ id: 'e1', sealed: 'AAAA' }, null] },
        { agentId: 'a', entries: [{ id: 'e1', sealed: 7 }] },
      ];
      const payloads = values.map((v) => ({
        metadata: { [METADATA_ENCODING_KEY]: Buffer.from('json/plain').toString('base64') },
        data: Buffer.from(JSON.stringify(v)).toString('base64'),
      }));
      const res = await fetch(`${server.url}/codec/decode`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
        body: JSON.stringify({ payloads }),
      });
      expect(res.status).toBe(200);
      const shown = ((await res.json()) as { payloads: { data: string }[] }).payloads.map(
        (p) => JSON.parse(Buffer.from(p.data, 'base64').toString('utf8')) as unknown,
      );
      expect(shown).toEqual(values);
    });
  });
});

describe('a write of the entry resent while forget erases it', () => {
  it('leaves no key under which its resent copy opens', async () => {
    const agent = env.agent('temporal-erasure-resent');
    const write = { text: ERASED, kind: 'fact' as const, idempotencyKey: 'halcyon-fees' };
    const [stored] = (await env.client.write({ agentId: agent, entries: [write] })).entries;
    // Sent again after forget deleted its key and before the tombstone: the client finds no
    // key and makes one, and the entry, still stored, is answered existing.
    let resent = '';
    const undo = interleaveOnce(
      env.worker.store,
      'tombstones',
      'replaceOne',
      async () => {
        const [again] = (await env.client.write({ agentId: agent, entries: [write] })).entries;
        resent = again!.status;
      },
      (args) => (args[0] as { _id: string })._id === stored!.id,
    );
    try {
      await env.client.forget({ agentId: agent, entryId: stored!.id });
    } finally {
      undo();
    }
    expect(resent).toBe('existing');
    expect([...(await contentKeys(env.store, agent, [stored!.id])).keys()]).toEqual([]);
    const report = await env.client.verify({ agentId: agent });
    expect(report.findings.filter((f) => f.check === 'erased-in-temporal-history')).toEqual([]);
  });
});
