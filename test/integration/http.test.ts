import { randomUUID } from 'node:crypto';
import { connect } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverDeps, startHttpServer, type RunningServer } from '../../cli/commands/serve';
import { writeLimitsOf } from '../../core/policy';
import { buildHttpServer } from '../../server/http';
import { createKey } from '../../store/keys';
import { jsonSchema } from '../../server/openapi';
import {
  entryResultSchema,
  errorSchema,
  forgetResultSchema,
  impossibleReportSchema,
  recallResultSchema,
  refusalSchema,
  restoreResultSchema,
  turnResultSchema,
  unpinResultSchema,
  verifyReportSchema,
  windowSummarySchema,
  windowViewSchema,
  writeBodySchema,
  writeResultSchema,
} from '../../server/schemas';
import { startTestEnv, type TestEnv } from '../support/env';

/**
 * The HTTP API (docs/interfaces.md, HTTP API) against the real stack: a real worker and client, the
 * Fastify app in-process (`inject`) for most cases and over a listening socket for one. Each
 * answer is also read back through the zod schema the OpenAPI document was generated from.
 */

let env: TestEnv;
let app: FastifyInstance;

beforeAll(async () => {
  env = await startTestEnv();
  app = buildHttpServer(serverDeps(env.client, env.config));
  await app.ready();
});

afterAll(async () => {
  await app?.close();
  await env?.close();
});

async function call(method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, payload?: object) {
  const res = await app.inject({ method, url, ...(payload !== undefined && { payload }) });
  return { status: res.statusCode, body: res.json() };
}

describe('the HTTP API over a listening socket', () => {
  let server: RunningServer;
  beforeAll(async () => {
    // A short request timeout, so that the trickle below is cut off in seconds.
    server = await startHttpServer(env.client, { ...env.config, httpRequestTimeoutMs: 2_000 }, { port: 0 });
  });
  afterAll(async () => {
    await server?.close();
  });

  it('cuts off a request that trickles in, rather than holding its connection for good', async () => {
    const { hostname, port } = new URL(server.url);
    const socket = connect(Number(port), hostname);
    await new Promise((resolve) => socket.once('connect', resolve));
    // Headers that never end: one byte at a time, slower than any client sends.
    socket.write('POST /v1/agents/slow/recall HTTP/1.1\r\nHost: x\r\n');
    const drip = setInterval(() => socket.write('X'), 1_000);
    const answer: string[] = [];
    socket.on('data', (d: Buffer) => answer.push(d.toString()));
    try {
      await new Promise((resolve) => socket.once('close', resolve));
    } finally {
      clearInterval(drip);
    }
    // Node answers 408 Request Timeout as it closes.
    expect(answer.join('')).toMatch(/^HTTP\/1\.1 408/);
  }, 120_000);

  it('writes then recalls, as the README shows with curl', async () => {
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const agentId = env.agent('http-socket');
    // As `memgate keys create --agents <agentId>` makes one: every operation needs a key.
    const { key } = await createKey(env.store, agentId, Date.now());
    const post = (path: string, body: string) =>
      fetch(`${server.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
        body,
      });
    const unkeyed = await fetch(`${server.url}/v1/agents/${agentId}/recall`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"query":"anything"}',
    });
    expect(unkeyed.status).toBe(401);
    expect(await unkeyed.json()).toMatchObject({ error: { type: 'Unauthenticated' } });

    const written = await post(
      `/v1/agents/${agentId}/memories`,
      '{"entries":[{"text":"The supplier notice period is 30 days.","kind":"fact","salience":0.9}]}',
    );
    expect(written.status).toBe(200);
    expect(written.headers.get('content-type')).toMatch(/^application\/json/);
    const { entries } = writeResultSchema.parse(await written.json());
    expect(entries).toEqual([{ id: expect.any(String), status: 'created' }]);

    const recalled = await post(`/v1/agents/${agentId}/recall`, '{"query":"supplier notice period","k":5}');
    expect(recalled.status).toBe(200);
    const { hits } = recallResultSchema.parse(await recalled.json());
    expect(hits.map((h) => [h.id, h.text, h.kind, h.tier])).toEqual([
      [entries[0]!.id, 'The supplier notice period is 30 days.', 'fact', 'hot'],
    ]);

    const health = await fetch(`${server.url}/healthz`);
    expect([health.status, await health.json()]).toEqual([200, { status: 'ok' }]);
    const missing = await fetch(`${server.url}/v1/nowhere`);
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ error: { type: 'NotFound' } });
  });

  // Found by the fuzz (openapi-fuzz.test.ts): the document of a keyed server declared no key
  // and no 401 or 403, and its Error schema had no `Unauthenticated` or `Forbidden` type.
  it('documents the key it requires: bearer security, 401 and 403, in the Error schema', async () => {
    const doc = (await (await fetch(`${server.url}/openapi.json`)).json()) as {
      paths: Record<string, Record<string, { security?: unknown; responses: Record<string, unknown> }>>;
      components: { schemas: { Error: unknown }; securitySchemes: Record<string, unknown> };
    };
    expect(doc.components.securitySchemes).toEqual({
      apiKey: expect.objectContaining({ type: 'http', scheme: 'bearer' }),
    });
    for (const [path, methods] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(methods)) {
        // The API and the codec endpoint (Temporal's protocol, outside /v1) take a key.
        const keyed = path.startsWith('/v1/') || path.startsWith('/codec/');
        expect([method, path, op.security]).toEqual([method, path, keyed ? [{ apiKey: [] }] : undefined]);
        expect([method, path, '401' in op.responses, '403' in op.responses]).toEqual([
          method,
          path,
          keyed,
          keyed,
        ]);
      }
    }
    const errorTypes = (
      doc.components.schemas.Error as { properties: { error: { properties: { type: { enum: string[] } } } } }
    ).properties.error.properties.type.enum;
    const agentId = env.agent('http-doc');
    const { key } = await createKey(env.store, agentId, Date.now());
    const recall = (authorization: string | undefined, agent: string) =>
      fetch(`${server.url}/v1/agents/${agent}/recall`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(authorization && { authorization }) },
        body: '{"query":"anything"}',
      });
    const unkeyed = await recall(undefined, agentId);
    const outOfScope = await recall(`Bearer ${key}`, env.agent('someone-else'));
    for (const [res, status, type] of [
      [unkeyed, 401, 'Unauthenticated'],
      [outOfScope, 403, 'Forbidden'],
    ] as const) {
      expect(res.status).toBe(status);
      const body = errorSchema.parse(await res.json());
      expect(body.error.type).toBe(type);
      expect(errorTypes).toContain(type);
    }
  });
});

describe('memories', () => {
  it('writes once per idempotency key, and recalls by default and deep', async () => {
    const agentId = env.agent('http-write');
    const entry = { text: 'Invoices go to the finance mailbox.', idempotencyKey: 'k1', salience: 0.8 };
    const first = await call('POST', `/v1/agents/${agentId}/memories`, { agentId, entries: [entry] });
    expect(first.status).toBe(200);
    expect(writeResultSchema.parse(first.body).entries[0]!.status).toBe('created');
    const again = await call('POST', `/v1/agents/${agentId}/memories`, { entries: [entry] });
    expect(again.body.entries).toEqual([{ id: first.body.entries[0].id, status: 'existing' }]);

    const recall = await call('POST', `/v1/agents/${agentId}/recall`, { query: 'finance invoices' });
    expect(recall.status).toBe(200);
    expect(recallResultSchema.parse(recall.body).hits.map((h) => h.id)).toEqual([first.body.entries[0].id]);
    expect(recall.body.missing).toBeUndefined();

    const deep = await call('POST', `/v1/agents/${agentId}/recall`, {
      agentId,
      query: 'finance invoices',
      deep: true,
    });
    expect(deep.status).toBe(200);
    const parsed = recallResultSchema.parse(deep.body);
    expect(parsed.hits.map((h) => h.id)).toEqual([first.body.entries[0].id]);
    expect(parsed.missing).toEqual([]);
  });

  it('forgets an entry: recall no longer finds it, a second forget finds nothing to do, an unknown id is 404', async () => {
    const agentId = env.agent('http-forget');
    const written = await call('POST', `/v1/agents/${agentId}/memories`, {
      entries: [{ text: 'The lab door code is 4471.', kind: 'fact' }],
    });
    const id = written.body.entries[0].id as string;

    const forgotten = await call('DELETE', `/v1/agents/${agentId}/memories/${id}`);
    expect(forgotten.status).toBe(200);
    expect(forgetResultSchema.parse(forgotten.body)).toMatchObject({ entryId: id, tiers: ['hot'] });

    for (const deep of [false, true]) {
      const recall = await call('POST', `/v1/agents/${agentId}/recall`, { query: 'lab door code', deep });
      expect(recall.status).toBe(200);
      expect(recall.body.hits).toEqual([]);
    }

    // Erasure is idempotent (its workflow may be rerun at any point): the second finds no tier.
    const second = await call('DELETE', `/v1/agents/${agentId}/memories/${id}`);
    expect(second.status).toBe(200);
    expect(second.body).toMatchObject({ entryId: id, tiers: [] });

    const unknown = await call('DELETE', `/v1/agents/${agentId}/memories/never-written`);
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toMatchObject({
      type: 'NotFound',
      message: expect.stringContaining('never-written'),
    });
  });

  it('restore of an entry that is not superseded is 409 Conflict; of an unknown one 404', async () => {
    const agentId = env.agent('http-restore');
    const written = await call('POST', `/v1/agents/${agentId}/memories`, {
      entries: [{ text: 'The quota is 500 calls per hour.', kind: 'fact' }],
    });
    const id = written.body.entries[0].id as string;

    const conflict = await call('POST', `/v1/agents/${agentId}/memories/${id}/restore`);
    expect(conflict.status).toBe(409);
    expect(conflict.body).toEqual({
      error: {
        type: 'Conflict',
        message: expect.stringContaining('is not superseded'),
        details: expect.any(Object),
      },
    });

    const unknown = await call('POST', `/v1/agents/${agentId}/memories/nope/restore`, {});
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.type).toBe('NotFound');
    // The schema of a success, for the document's sake: what the client returns.
    expect(restoreResultSchema.safeParse({ id, tier: 'hot', restored: ['supersession'] }).success).toBe(true);
  });

  it('refuses an invalid write with 400 InvalidInput naming each field', async () => {
    const agentId = env.agent('http-invalid');
    const bad = await call('POST', `/v1/agents/${agentId}/memories`, {
      entries: [{ text: '   ', salience: 2 }],
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.type).toBe('InvalidInput');
    expect(bad.body.error.details.issues.map((i: { path: string }) => i.path).sort()).toEqual([
      'entries.0.salience',
      'entries.0.text',
    ]);

    const unknownField = await call('POST', `/v1/agents/${agentId}/recall`, { query: 'x', top: 3 });
    expect(unknownField.status).toBe(400);
    expect(unknownField.body.error.details.issues).toEqual([
      { path: '', message: expect.stringContaining('top') },
    ]);

    const otherAgent = await call('POST', `/v1/agents/${agentId}/memories`, {
      agentId: 'someone-else',
      entries: [{ text: 'hello there' }],
    });
    expect(otherAgent.status).toBe(400);
    expect(otherAgent.body.error.details.issues).toEqual([{ path: 'agentId', message: expect.any(String) }]);

    const noBody = await call('POST', `/v1/agents/${agentId}/memories`);
    expect(noBody.status).toBe(400);
    expect(noBody.body.error.type).toBe('InvalidInput');

    const badAgent = await call('POST', `/v1/agents/$where/recall`, { query: 'supplier' });
    expect(badAgent.status).toBe(400);
    expect(badAgent.body.error.details.issues).toEqual([{ path: 'agentId', message: expect.any(String) }]);

    // Nothing was written.
    const recall = await call('POST', `/v1/agents/${agentId}/recall`, { query: 'hello there', deep: true });
    expect(recall.body.hits).toEqual([]);
  });

  it('verify and impossible answer for one agent or all, and refuse an agent id that is not one', async () => {
    const agentId = env.agent('http-verify');
    await call('POST', `/v1/agents/${agentId}/memories`, { entries: [{ text: 'Standup is at nine.' }] });
    const one = await call('GET', `/v1/verify?agentId=${agentId}`);
    expect(one.status).toBe(200);
    expect(verifyReportSchema.parse(one.body)).toMatchObject({ ok: true, agents: 1, findings: [] });
    const all = await call('GET', '/v1/verify');
    expect(all.status).toBe(200);
    expect(all.body.ok).toBe(true);

    const impossible = await call('GET', `/v1/impossible?agentId=${agentId}`);
    expect(impossible.status).toBe(200);
    expect(impossibleReportSchema.parse(impossible.body)).toEqual({ agentId, queries: 0, groups: [] });
    expect((await call('GET', '/v1/impossible')).status).toBe(200);

    const bad = await call('GET', '/v1/verify?agentId=%24ne');
    expect(bad.status).toBe(400);
    expect(bad.body.error.details.issues).toEqual([{ path: 'agentId', message: expect.any(String) }]);
  });

  it('takes an agent id as long as the id schema allows, and refuses a longer one as InvalidInput', async () => {
    // 128 characters: the most an agent id may hold (core/entry.ts).
    const agentId = env.agent('http-long-id').padEnd(128, 'x');
    const written = await call('POST', `/v1/agents/${agentId}/memories`, {
      entries: [{ text: 'The long-id agent ships on Fridays.' }],
    });
    expect(written.status).toBe(200);
    const recalled = await call('POST', `/v1/agents/${agentId}/recall`, { query: 'ships fridays' });
    expect(recalled.status).toBe(200);
    expect(recalled.body.hits).toHaveLength(1);

    const tooLong = await call('POST', `/v1/agents/${agentId}y/recall`, { query: 'ships fridays' });
    expect(tooLong.status).toBe(400);
    expect(errorSchema.parse(tooLong.body).error.type).toBe('InvalidInput');
    expect(tooLong.body.error.details.issues).toEqual([{ path: 'agentId', message: expect.any(String) }]);
  });

  it('refuses a path the router cannot read in the same JSON shape: a bad escape, a parameter past its limit', async () => {
    for (const [url, status] of [
      ['/v1/agents/%zz', 400],
      ['/v1/agents/%E0%A4/memories', 400],
      [`/v1/agents/${'a'.repeat(1100)}`, 414],
    ] as const) {
      const res = await call('GET', url);
      expect([url.slice(0, 40), res.status]).toEqual([url.slice(0, 40), status]);
      expect(errorSchema.parse(res.body).error.type).toBe('InvalidInput');
    }
  });
});

describe('context windows', () => {
  it('opens, admits, refuses a rehydration over a pin with 409 RehydrationBlocked and its details, and closes', async () => {
    const session = `http-${randomUUID().slice(0, 8)}`;
    const w = `/v1/windows/${session}`;
    const opened = await call('PUT', w, { capacity: 1000 });
    expect(opened.status).toBe(200);
    expect(windowViewSchema.parse(opened.body)).toMatchObject({ turn: 0, used: 0, free: 1000 });
    expect((await call('PUT', w, { capacity: 2000 })).body.error.type).toBe('Conflict');

    const a = await call('POST', `${w}/admit`, { segmentId: 'a', tokens: 600, salience: 0.5 });
    expect(a.status).toBe(200);
    expect(entryResultSchema.parse(a.body).segment.id).toBe('a');
    // b is pinned and pushes a out: a may not come back over it while the pin holds.
    const b = await call('POST', `${w}/admit`, {
      segmentId: 'b',
      tokens: 600,
      salience: 0.7,
      pin: { kind: 'explicit' },
    });
    expect(b.status).toBe(200);
    expect(b.body.evicted.map((e: { segmentId: string }) => e.segmentId)).toEqual(['a']);

    const refused = await call('POST', `${w}/rehydrate`, { segmentId: 'a', salience: 0.95 });
    expect(refused.status).toBe(409);
    expect(refused.body.error.type).toBe('RehydrationBlocked');
    const refusal = refusalSchema.parse(refused.body.error.details);
    expect(refusal.reasons).toEqual(['evictedByLivePin', 'wouldDisplacePinned']);
    expect(refusal).toMatchObject({
      operation: 'rehydrate',
      incoming: { id: 'a', tokens: 600, salience: 0.95 },
    });
    expect(refusal.wouldDisplace).toEqual([expect.objectContaining({ id: 'b', pinned: true })]);
    expect(refusal.pins).toEqual([{ segmentId: 'b', pin: { kind: 'explicit' } }]);

    const unpinned = await call('POST', `${w}/unpin`, { segmentId: 'b' });
    expect(unpinResultSchema.parse(unpinned.body).released).toEqual([
      { segmentId: 'b', pin: { kind: 'explicit' } },
    ]);
    const pinned = await call('POST', `${w}/pin`, {
      segmentId: 'b',
      pin: { kind: 'untilTurn', expiresAtTurn: 1 },
    });
    expect(pinned.status).toBe(200);
    expect(pinned.body.pins).toEqual([{ kind: 'untilTurn', expiresAtTurn: 1 }]);
    const turn = await call('POST', `${w}/turn`);
    expect(turnResultSchema.parse(turn.body)).toEqual({
      turn: 1,
      lapsed: [{ segmentId: 'b', pin: { kind: 'untilTurn', expiresAtTurn: 1 } }],
    });
    const shown = await call('GET', w);
    expect(windowViewSchema.parse(shown.body)).toMatchObject({ turn: 1, used: 600 });

    const closed = await call('POST', `${w}/close`);
    expect(windowSummarySchema.parse(closed.body)).toMatchObject({
      turn: 1,
      segments: 1,
      used: 600,
      evictions: 1,
    });
    const again = await call('POST', `${w}/close`);
    expect(again.status).toBe(409);
    expect(again.body.error).toMatchObject({
      type: 'Conflict',
      details: { sessionId: session, closed: true },
    });

    const never = await call('GET', `/v1/windows/never-${session}`);
    expect(never.status).toBe(404);
    expect(never.body.error.type).toBe('NotFound');
    const invalid = await call('POST', `${w}/admit`, { segmentId: 'c', tokens: -1, salience: 0.5 });
    expect(invalid.status).toBe(400);
    expect(invalid.body.error.details.issues).toEqual([{ path: 'tokens', message: expect.any(String) }]);
  });
});

describe('service endpoints', () => {
  it('/healthz and /readyz answer 200 with Temporal and the store reachable', async () => {
    expect(await call('GET', '/healthz')).toEqual({ status: 200, body: { status: 'ok' } });
    expect(await call('GET', '/readyz')).toEqual({
      status: 200,
      body: { status: 'ready', checks: { temporal: { ok: true }, store: { ok: true } } },
    });
  });

  it('/readyz is 503 StackUnavailable naming a server that does not answer, and none of its error text', async () => {
    const deps = serverDeps(env.client, env.config);
    const logged: unknown[] = [];
    const down = buildHttpServer(
      {
        ...deps,
        probes: {
          ...deps.probes,
          store: () => Promise.reject(new Error('connect ECONNREFUSED 10.0.0.5:27017 (user memgate_admin)')),
        },
      },
      { onServerError: (err) => logged.push(err) },
    );
    const res = await down.inject({ method: 'GET', url: '/readyz' });
    expect(res.statusCode).toBe(503);
    expect(res.json().error).toMatchObject({
      type: 'StackUnavailable',
      message: expect.stringMatching(
        /^a server memgate depends on did not answer in time; retrying is safe \(error [0-9a-f]{12}\)$/,
      ) as string,
      details: { checks: { temporal: { ok: true }, store: { ok: false, error: 'failed' } } },
    });
    // Anyone may ask /readyz; what the store said goes only to the server's log.
    expect(res.body).not.toMatch(/ECONNREFUSED|10\.0\.0\.5|memgate_admin/);
    expect(String((logged[0] as Error).cause)).toContain('ECONNREFUSED 10.0.0.5:27017');
    await down.close();
  });

  it('/readyz asked many times at once asks each server once, for all of them', async () => {
    const deps = serverDeps(env.client, env.config);
    const asked = { temporal: 0, store: 0 };
    const counted = (name: keyof typeof asked) => async () => {
      asked[name]++;
      return deps.probes[name]!();
    };
    const app = buildHttpServer({
      ...deps,
      probes: { temporal: counted('temporal'), store: counted('store') },
    });
    const answers = await Promise.all(
      Array.from({ length: 50 }, () => app.inject({ method: 'GET', url: '/readyz' })),
    );
    expect(answers.map((r) => r.statusCode)).toEqual(Array.from({ length: 50 }, () => 200));
    // Unauthenticated, so anyone may flood it: the store's commands must not follow the flood.
    expect(asked).toEqual({ temporal: 1, store: 1 });
    // A call after they are answered asks again: readiness is never an old answer.
    expect((await app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
    expect(asked).toEqual({ temporal: 2, store: 2 });
    await app.close();
  });

  it('answers every API response with nosniff, so no browser reads its JSON as a page', async () => {
    for (const url of ['/healthz', '/v1/agents/a1/nothing', '/openapi.json']) {
      const res = await app.inject({ method: 'GET', url });
      expect([url, res.headers['x-content-type-options']]).toEqual([url, 'nosniff']);
    }
  });

  it('an unknown route is a 404 in the same JSON shape', async () => {
    const res = await call('POST', '/v1/agents/a1/nothing', {});
    expect(res).toEqual({
      status: 404,
      body: {
        error: {
          type: 'NotFound',
          message: 'no route POST /v1/agents/a1/nothing',
          details: { method: 'POST', path: '/v1/agents/a1/nothing' },
        },
      },
    });
  });

  it('/openapi.json is an OpenAPI 3.1 document of every route, its schemas generated from the zod ones', async () => {
    const { status, body: doc } = await call('GET', '/openapi.json');
    expect(status).toBe(200);
    expect(doc.openapi).toBe('3.1.0');
    const operations = Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(
      ([path, methods]) => Object.keys(methods).map((m) => `${m.toUpperCase()} ${path}`),
    );
    expect(operations.sort()).toEqual(
      [
        'GET /healthz',
        'GET /readyz',
        'GET /openapi.json',
        'POST /v1/agents/{agentId}/memories',
        'POST /v1/agents/{agentId}/recall',
        'DELETE /v1/agents/{agentId}/memories/{entryId}',
        'POST /v1/agents/{agentId}/memories/{entryId}/restore',
        'DELETE /v1/agents/{agentId}',
        'GET /v1/agents/{agentId}/export',
        'GET /v1/agents',
        'GET /v1/agents/{agentId}',
        'GET /v1/agents/{agentId}/nights',
        'GET /v1/agents/{agentId}/memories',
        'GET /v1/agents/{agentId}/memories/{entryId}',
        'GET /v1/audit',
        'GET /v1/impossible',
        'GET /v1/verify',
        'POST /codec/encode',
        'POST /codec/decode',
        'PUT /v1/windows/{sessionId}',
        'GET /v1/windows/{sessionId}',
        'POST /v1/windows/{sessionId}/admit',
        'POST /v1/windows/{sessionId}/rehydrate',
        'POST /v1/windows/{sessionId}/pin',
        'POST /v1/windows/{sessionId}/unpin',
        'POST /v1/windows/{sessionId}/turn',
        'POST /v1/windows/{sessionId}/close',
      ].sort(),
    );

    const write = doc.paths['/v1/agents/{agentId}/memories'].post;
    const limits = writeLimitsOf(env.client.policy);
    const schema = write.requestBody.content['application/json'].schema;
    expect(schema).toEqual(jsonSchema(writeBodySchema(limits), 'input'));
    expect(schema.required).toEqual(['entries']);
    expect(schema.properties.entries.maxItems).toBe(limits.maxEntriesPerWrite);
    expect(schema.properties.entries.items.properties.text).toEqual({
      type: 'string',
      maxLength: limits.maxTextChars,
    });
    expect(Object.keys(schema.properties.entries.items.properties)).toEqual(
      expect.arrayContaining([
        'text',
        'kind',
        'salience',
        'idempotencyKey',
        'source',
        'subject',
        'attribute',
      ]),
    );
    expect(write.parameters).toEqual([
      { name: 'agentId', in: 'path', required: true, schema: expect.objectContaining({ type: 'string' }) },
    ]);
    expect(Object.keys(write.responses).sort()).toEqual(['200', '400', '403', '500', '503']);
    expect(write.responses['400'].content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/Error',
    });
    const rehydrate = doc.paths['/v1/windows/{sessionId}/rehydrate'].post;
    expect(rehydrate.responses['409'].description).toBe('Conflict or RehydrationBlocked');
    expect(doc.components.schemas.Error.properties.error.required).toEqual(['type', 'message', 'details']);
    // Served without keys (no per-request hook), it declares no security and no 401 or 403.
    expect(doc.components.securitySchemes).toBeUndefined();
    expect(write.security).toBeUndefined();
  });
});
