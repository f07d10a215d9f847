import { describe, expect, it } from 'vitest';
import {
  ConflictError,
  EvictionBoundaryError,
  InvalidConfigError,
  InvalidInputError,
  ModelError,
  NotFoundError,
  StackUnavailableError,
  UnauthenticatedError,
  type MemgateError,
} from '../../core/errors';
import { policyOf } from '../../core/policy';
import { parseConfig } from '../../core/config';
import { RehydrationBlocked } from '../../core/window';
import { STATUS_BY_TYPE, toHttpError } from '../../server/errors';
import { buildHttpServer, type ServerDeps, type ServerOptions } from '../../server/http';
import { mountMcp } from '../../server/mcpHttp';
import type { MemgateClient } from '../../client/client';
import type { WindowClient } from '../../client/window';

/** The HTTP status of each MemgateError type, and the JSON every failure answers with. */

const refusal = {
  operation: 'rehydrate' as const,
  turn: 3,
  reasons: ['wouldDisplacePinned' as const],
  incoming: { id: 'b', tokens: 10, salience: 0.9 },
  wouldDisplace: [{ id: 'a', tokens: 10, salience: 0.5, pinned: true }],
  pins: [{ segmentId: 'a', pin: { kind: 'explicit' as const } }],
};

describe('the type → status table', () => {
  it.each<[MemgateError, number]>([
    [new InvalidInputError('invalid write', [{ path: 'entries.0.text', message: 'must not be empty' }]), 400],
    [new InvalidConfigError('MEMGATE_HTTP_PORT', 'a TCP port 1-65535', 'x'), 400],
    [new NotFoundError('no entry'), 404],
    [new ConflictError('not superseded'), 409],
    [new RehydrationBlocked(refusal), 409],
    [new EvictionBoundaryError('floor above gate'), 422],
    [new ModelError('model timed out', true), 502],
    [new StackUnavailableError('Temporal is gone'), 503],
  ])('%s answers %i with its type, message and details', (err, status) => {
    const answer = toHttpError(err);
    expect(answer.status).toBe(status);
    expect(STATUS_BY_TYPE[err.type]).toBe(status);
    expect(answer.body.error.type).toBe(err.type);
    // InvalidConfig, StackUnavailable and ModelError are reworded (below).
    if (!['InvalidConfig', 'StackUnavailable', 'ModelError'].includes(err.type)) {
      expect(answer.body.error.message).toBe(err.message);
    }
  });

  it('keeps the issues of InvalidInput and the refusal of RehydrationBlocked in the details', () => {
    const invalid = toHttpError(new InvalidInputError('invalid', [{ path: 'k', message: 'too big' }]));
    expect(invalid.body.error.details).toEqual({ issues: [{ path: 'k', message: 'too big' }] });
    expect(toHttpError(new RehydrationBlocked(refusal)).body.error.details).toEqual(refusal);
  });

  it('leaves out the value an invalid variable held, and credentials in a URI', () => {
    const config = toHttpError(new InvalidConfigError('OPENAI_API_KEY', 'a non-empty key', 'sk-secret'));
    expect(JSON.stringify(config.body)).not.toContain('sk-secret');
    const missing = toHttpError(new NotFoundError('no agent at mongodb://memgate:hunter2@db:27017/x'));
    expect(missing.body.error.message).toBe('no agent at mongodb://***@db:27017/x');
  });

  it.each([
    new StackUnavailableError('connection 7 to db-internal.prod:27017 closed: MongoNetworkError', {
      operation: 'entries_hot.find',
    }),
    new ModelError('upstream 500 from http://10.0.3.7:8790/v1/embeddings: CUDA out of memory', true),
  ])("holds back another server's words ($type), giving an id the log has them under", (err) => {
    const answer = toHttpError(err);
    expect(answer.status).toBe(STATUS_BY_TYPE[err.type]);
    expect(answer.body.error.type).toBe(err.type);
    expect(answer.errorId).toMatch(/^[0-9a-f]{12}$/);
    expect(answer.body.error.details).toEqual({ errorId: answer.errorId });
    expect(answer.body.error.message).toContain(answer.errorId);
    expect(JSON.stringify(answer.body)).not.toMatch(/27017|db-internal|Mongo|10\.0\.3|CUDA|entries_hot/);
    // Each failure has an id of its own.
    expect(toHttpError(err).errorId).not.toBe(answer.errorId);
  });

  it('answers anything else with a generic 500 that says nothing of it', () => {
    const answer = toHttpError(new TypeError('cannot read properties of undefined (secret at /srv/x.ts:3)'));
    expect(answer.status).toBe(500);
    expect(answer.body.error.type).toBe('Internal');
    expect(JSON.stringify(answer.body)).not.toMatch(/secret|x\.ts|TypeError/);
    expect(answer.body.error.details).toEqual({});
  });
});

/**
 * The API over dependencies no request below reaches (each fails before a handler runs),
 * but `impossible`, which a test may give.
 */
function stubbedApp(
  options: ServerOptions = {},
  impossible: ServerDeps['impossible'] = () => Promise.reject(new Error('unused')),
) {
  const deps = { memgate: { policy: policyOf(parseConfig({})) }, windows: {}, impossible, probes: {} };
  return buildHttpServer(deps as unknown as ServerDeps, options);
}

describe("Fastify's own refusals, in the same shape", () => {
  const app = stubbedApp();

  it('a body that is not JSON is 400 InvalidInput', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/v1/agents/a1/recall',
      headers: { 'content-type': 'application/json' },
      payload: '{"query": ',
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: { type: 'InvalidInput' } });
  });

  it('a body of another media type is 415 InvalidInput', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/v1/agents/a1/recall',
      headers: { 'content-type': 'application/xml' },
      payload: '<query/>',
    });
    expect(res.statusCode).toBe(415);
    expect(res.json()).toMatchObject({ error: { type: 'InvalidInput' } });
  });

  it('an unknown route is 404 NotFound', async () => {
    const res = await app.inject({ method: 'GET', url: '/v1/nothing?x=1' });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({
      error: {
        type: 'NotFound',
        message: 'no route GET /v1/nothing',
        details: { method: 'GET', path: '/v1/nothing' },
      },
    });
  });

  it('an invalid path parameter is 400 naming it, before the client is asked', async () => {
    const res = await app.inject({ method: 'DELETE', url: '/v1/agents/a1/memories/%24where' });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.details.issues).toEqual([{ path: 'entryId', message: expect.any(String) }]);
  });

  it('/healthz answers without asking any server', async () => {
    const res = await app.inject({ method: 'GET', url: '/healthz' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 'ok' });
  });
});

describe('the per-request hook (where authentication goes)', () => {
  it('runs before each operation, knowing which, and not before health or the document', async () => {
    const seen: string[] = [];
    const app = stubbedApp({
      authenticate: async (request) => {
        seen.push(request.routeOptions.config.operationId ?? '?');
        throw new ConflictError('refused by the hook');
      },
    });
    expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    expect((await app.inject({ method: 'GET', url: '/openapi.json' })).statusCode).toBe(200);
    const res = await app.inject({ method: 'GET', url: '/v1/verify' });
    expect(res.statusCode).toBe(409);
    expect(res.json().error).toMatchObject({ type: 'Conflict', message: 'refused by the hook' });
    expect(seen).toEqual(['verify']);
  });

  it('authenticates before it reads a body: without a key, a body that is not JSON is 401, not 400', async () => {
    const app = stubbedApp({
      authenticate: async () => {
        throw new UnauthenticatedError('an API key is required: Authorization: Bearer <key>');
      },
    });
    const res = await app.inject({
      method: 'POST',
      url: '/v1/agents/a1/memories',
      headers: { 'content-type': 'application/json' },
      payload: '{"entries": [ not json',
    });
    expect(res.statusCode).toBe(401);
    expect(res.json().error.type).toBe('Unauthenticated');
  });
});

describe('the rate limit per key', () => {
  it('answers a key over its share with 429 RateLimited and Retry-After, before the call runs; others keep theirs', async () => {
    let ran = 0;
    const app = stubbedApp(
      {
        // The key is the bearer itself here; memgate serve looks it up (requireKey).
        authenticate: async (request) => {
          request.keyScope = { keyId: request.headers.authorization ?? '', agents: '*' };
        },
        rateLimitPerMinute: 3,
      },
      async ({ agentId }) => {
        ran++;
        return { agentId: agentId!, queries: 0, groups: [] };
      },
    );
    const impossible = (key: string) =>
      app.inject({ method: 'GET', url: '/v1/impossible?agentId=a1', headers: { authorization: key } });
    for (let i = 0; i < 3; i++) expect((await impossible('one')).statusCode).toBe(200);
    const refused = await impossible('one');
    expect(refused.statusCode).toBe(429);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expect(refused.json().error).toMatchObject({ type: 'RateLimited', details: { limit: 3 } });
    expect(ran).toBe(3);
    // Another key, and health, are not held back by it.
    expect((await impossible('two')).statusCode).toBe(200);
    for (let i = 0; i < 5; i++)
      expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
  });

  it('counts a credential not yet authenticated against its address too: made-up keys, one a request, are refused past the share without a lookup', async () => {
    const looked = { up: 0 };
    const app = stubbedApp(
      {
        // Only `real` is a key; any other is looked up and refused.
        authenticate: async (request) => {
          looked.up++;
          if (request.headers.authorization !== 'Bearer real')
            throw new UnauthenticatedError('no live API key');
          request.keyScope = { keyId: 'real', agents: '*' };
        },
        rateLimitPerMinute: 3,
      },
      async () => ({ queries: 0, groups: [] }),
    );
    const impossible = (key: string) =>
      app.inject({ method: 'GET', url: '/v1/impossible', headers: { authorization: `Bearer ${key}` } });
    expect((await impossible('real')).statusCode).toBe(200);
    for (let i = 0; i < 2; i++) expect((await impossible(`made-up-${i}`)).statusCode).toBe(401);
    for (let i = 2; i < 8; i++) expect((await impossible(`made-up-${i}`)).statusCode).toBe(429);
    expect(looked.up).toBe(3);
    // A key the process has seen authenticated keeps its own share.
    expect((await impossible('real')).statusCode).toBe(200);
    expect(looked.up).toBe(4);
    await app.close();
  });

  it('tells a caller refused as StackUnavailable when to try again', async () => {
    const app = stubbedApp({
      authenticate: async () => {
        throw new StackUnavailableError('the store did not answer entries_hot.find within 15000 ms');
      },
    });
    const res = await app.inject({ method: 'GET', url: '/v1/verify' });
    expect(res.statusCode).toBe(503);
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
  });
});

describe('calls in flight per caller', () => {
  it('answers one call more than MEMGATE_HTTP_IN_FLIGHT_PER_KEY at once 429 RateLimited, with Retry-After', async () => {
    // A count per minute let a flood of deep recalls hold the process (bench/load.ts).
    let release!: () => void;
    const gate = new Promise<void>((done) => (release = done));
    const app = stubbedApp({ inFlightPerCaller: { running: 2, queued: 0 } }, async () => {
      await gate;
      return { queries: 0, groups: [] };
    });
    const call = () => app.inject({ method: 'GET', url: '/v1/impossible' });
    const held = [call(), call()];
    // Both are in their handler before the third comes.
    await new Promise((done) => setTimeout(done, 50));
    const refused = await call();
    expect(refused.statusCode).toBe(429);
    expect(refused.json()).toMatchObject({ error: { type: 'RateLimited', details: { inFlightLimit: 2 } } });
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    release();
    expect((await Promise.all(held)).map((r) => r.statusCode)).toEqual([200, 200]);
    // Answered calls give their place back.
    expect((await call()).statusCode).toBe(200);
    await app.close();
  });

  it('lets calls past the bound wait their turn, in order, up to MEMGATE_HTTP_QUEUED_PER_KEY', async () => {
    let release!: () => void;
    const gate = new Promise<void>((done) => (release = done));
    const answered: number[] = [];
    let n = 0;
    const app = stubbedApp({ inFlightPerCaller: { running: 1, queued: 2 } }, async () => {
      const mine = n++;
      await gate;
      answered.push(mine);
      return { queries: 0, groups: [] };
    });
    const call = () => app.inject({ method: 'GET', url: '/v1/impossible' });
    const calls = [call(), call(), call()];
    await new Promise((done) => setTimeout(done, 50));
    // One runs, two wait: a fourth is refused at once.
    expect(n).toBe(1);
    const refused = await call();
    expect(refused.statusCode).toBe(429);
    expect(refused.json()).toMatchObject({ error: { type: 'RateLimited', details: { queuedLimit: 2 } } });
    release();
    expect((await Promise.all(calls)).map((r) => r.statusCode)).toEqual([200, 200, 200]);
    expect(answered).toEqual([0, 1, 2]);
    await app.close();
  });

  /** An app whose every call waits for `gate`, with a count of the look-ups of its keys. */
  function gatedApp(options: ServerOptions, gate: Promise<void>) {
    const looked = { up: 0 };
    const app = stubbedApp(
      {
        ...options,
        authenticate: async (request) => {
          looked.up++;
          request.keyScope = { keyId: request.headers.authorization ?? '', agents: '*' };
        },
      },
      async () => {
        await gate;
        return { queries: 0, groups: [] };
      },
    );
    mountMcp(app, {
      memgate: {} as MemgateClient,
      windows: {} as WindowClient,
      authenticate: async (key) => ({ keyId: key, agents: '*' }),
    });
    return { app, looked };
  }

  it('refuses a caller at its bound before its key is looked up: a flood costs no store read', async () => {
    let release!: () => void;
    const { app, looked } = gatedApp(
      { inFlightPerCaller: { running: 1, queued: 0 } },
      new Promise<void>((done) => (release = done)),
    );
    const call = () =>
      app.inject({ method: 'GET', url: '/v1/impossible', headers: { authorization: 'Bearer one' } });
    const held = call();
    await new Promise((done) => setTimeout(done, 50));
    for (let i = 0; i < 5; i++) expect((await call()).statusCode).toBe(429);
    expect(looked.up).toBe(1);
    // Another credential has a share of its own.
    const other = app.inject({
      method: 'GET',
      url: '/v1/impossible',
      headers: { authorization: 'Bearer two' },
    });
    await new Promise((done) => setTimeout(done, 50));
    release();
    expect((await other).statusCode).toBe(200);
    expect(looked.up).toBe(2);
    expect((await held).statusCode).toBe(200);
    await app.close();
  });

  it('counts /mcp against the same share as the API', async () => {
    let release!: () => void;
    const { app } = gatedApp(
      { inFlightPerCaller: { running: 1, queued: 0 } },
      new Promise<void>((done) => (release = done)),
    );
    const headers = { authorization: 'Bearer one' };
    const held = app.inject({ method: 'GET', url: '/v1/impossible', headers });
    await new Promise((done) => setTimeout(done, 50));
    const mcp = await app.inject({ method: 'GET', url: '/mcp', headers });
    expect(mcp.statusCode).toBe(429);
    expect(mcp.json()).toMatchObject({ error: { type: 'RateLimited' } });
    release();
    await held;
    // Its place given back, /mcp answers as it does (GET: not offered by a stateless server).
    expect((await app.inject({ method: 'GET', url: '/mcp', headers })).statusCode).toBe(405);
    await app.close();
  });

  it('refuses a caller past its requests a minute before its key is looked up', async () => {
    const { app, looked } = gatedApp({ rateLimitPerMinute: 2 }, Promise.resolve());
    const call = () =>
      app.inject({ method: 'GET', url: '/v1/impossible', headers: { authorization: 'Bearer one' } });
    expect((await call()).statusCode).toBe(200);
    expect((await call()).statusCode).toBe(200);
    for (let i = 0; i < 5; i++) expect((await call()).statusCode).toBe(429);
    expect(looked.up).toBe(2);
    await app.close();
  });
});
