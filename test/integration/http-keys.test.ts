import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverDeps } from '../../cli/commands/serve';
import { requireKey } from '../../server/auth';
import { buildHttpServer } from '../../server/http';
import { createKey, revokeKey } from '../../store/keys';
import { runMemgate } from '../support/cli';
import { untilHotEmbedded } from '../support/embedded';
import { startTestEnv, type TestEnv } from '../support/env';

/**
 * API keys, enforced by the server: agent A's key can neither read, write, forget nor restore
 * anything of agent B's, by id or by query, on any operation, and a refused call changes
 * nothing. Keys are stored as digests and die when revoked.
 */
let env: TestEnv;
let app: FastifyInstance;
let agentA: string;
let agentB: string;
let keyA: string;
let keyAll: string;
let entryB: string;

beforeAll(async () => {
  env = await startTestEnv();
  app = buildHttpServer(serverDeps(env.client, env.config), {
    authenticate: requireKey((key) => env.client.authenticate(key)),
  });
  await app.ready();
  agentA = env.agent('tenant-a');
  agentB = env.agent('tenant-b');
  keyA = (await createKey(env.store, `${agentA}*`, Date.now())).key;
  keyAll = (await createKey(env.store, '*', Date.now())).key;
  const written = await env.client.write({
    agentId: agentB,
    entries: [{ text: "Tenant B's vault code is 8812.", kind: 'fact', salience: 0.9 }],
  });
  entryB = written.entries[0]!.id;
});
afterAll(async () => {
  await app?.close();
  await env?.close();
});

async function call(
  key: string | undefined,
  method: 'GET' | 'POST' | 'PUT' | 'DELETE',
  url: string,
  payload?: object,
) {
  const res = await app.inject({
    method,
    url,
    ...(key !== undefined && { headers: { authorization: `Bearer ${key}` } }),
    ...(payload !== undefined && { payload }),
  });
  return { status: res.statusCode, body: res.json() as { error?: { type: string } } };
}

describe('a key scoped to agent A', () => {
  it('is refused every operation on agent B, by id or by query, and nothing changes', async () => {
    // The agent's workflow embeds B's entries after acknowledging them; that settles them.
    await untilHotEmbedded(env.store, agentB);
    const before = await env.store.hot.find({ agentId: agentB }).toArray();
    const attempts: [string, 'GET' | 'POST' | 'PUT' | 'DELETE', string, object?][] = [
      ['write', 'POST', `/v1/agents/${agentB}/memories`, { entries: [{ text: 'overwritten' }] }],
      ['recall', 'POST', `/v1/agents/${agentB}/recall`, { query: 'vault code' }],
      ['deep recall', 'POST', `/v1/agents/${agentB}/recall`, { query: 'vault code', deep: true }],
      ['forget', 'DELETE', `/v1/agents/${agentB}/memories/${entryB}`],
      ['restore', 'POST', `/v1/agents/${agentB}/memories/${entryB}/restore`, {}],
      ['verify B', 'GET', `/v1/verify?agentId=${agentB}`],
      ['verify all', 'GET', '/v1/verify'],
      ['impossible B', 'GET', `/v1/impossible?agentId=${agentB}`],
      ['impossible all', 'GET', '/v1/impossible'],
      ['a window of B', 'PUT', `/v1/windows/${agentB}-session`, {}],
      ['open B', 'GET', `/v1/agents/${agentB}`],
      ["B's nights", 'GET', `/v1/agents/${agentB}/nights`],
      ["B's entries", 'GET', `/v1/agents/${agentB}/memories`],
      ["B's entry", 'GET', `/v1/agents/${agentB}/memories/${entryB}`],
      ['the audit', 'GET', '/v1/audit'],
      // A route that takes no agent in its query is not scoped by one put there.
      ['the audit, naming A', 'GET', `/v1/audit?agentId=${agentA}`],
      // Its own agent in the path, B's in the body.
      [
        'body names B',
        'POST',
        `/v1/agents/${agentA}/memories`,
        { agentId: agentB, entries: [{ text: 'x' }] },
      ],
    ];
    for (const [what, method, url, payload] of attempts) {
      const res = await call(keyA, method, url, payload);
      expect([what, res.status]).toEqual([what, what === 'body names B' ? 400 : 403]);
      if (res.status === 403) expect(res.body.error?.type).toBe('Forbidden');
    }
    expect(await env.store.hot.find({ agentId: agentB }).toArray()).toEqual(before);
    expect(await env.store.queries.countDocuments({ agentId: agentB })).toBe(0);
  });

  it('works on agent A, and a key for * reaches both', async () => {
    const mine = await call(keyA, 'POST', `/v1/agents/${agentA}/memories`, {
      entries: [{ text: 'Tenant A keeps its plans in the blue folder.' }],
    });
    expect(mine.status).toBe(200);
    expect((await call(keyA, 'POST', `/v1/agents/${agentA}/recall`, { query: 'blue folder' })).status).toBe(
      200,
    );
    expect((await call(keyA, 'PUT', `/v1/windows/${agentA}-session`, {})).status).toBe(200);
    expect((await call(keyAll, 'POST', `/v1/agents/${agentB}/recall`, { query: 'vault code' })).status).toBe(
      200,
    );
    expect((await call(keyAll, 'GET', '/v1/verify')).status).toBe(200);
    // The agents a key lists are those it covers.
    const listed = async (k: string) =>
      ((await call(k, 'GET', '/v1/agents')).body as { agents: { agentId: string }[] }).agents.map(
        (a) => a.agentId,
      );
    expect(await listed(keyA)).toEqual([agentA]);
    expect(await listed(keyAll)).toEqual([agentA, agentB].sort());
  });
});

describe('keys', () => {
  it('without one, with a malformed one, or a revoked one: 401; health needs none', async () => {
    expect((await call(undefined, 'POST', `/v1/agents/${agentA}/recall`, { query: 'x' })).status).toBe(401);
    expect((await call('not-a-key', 'POST', `/v1/agents/${agentA}/recall`, { query: 'x' })).status).toBe(401);
    const doomed = await createKey(env.store, agentA, Date.now());
    expect((await call(doomed.key, 'POST', `/v1/agents/${agentA}/recall`, { query: 'x' })).status).toBe(200);
    expect(await revokeKey(env.store, doomed.keyId, Date.now())).toBe(true);
    const revoked = await call(doomed.key, 'POST', `/v1/agents/${agentA}/recall`, { query: 'x' });
    expect(revoked).toMatchObject({ status: 401, body: { error: { type: 'Unauthenticated' } } });
    expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
  });

  it('memgate keys create prints the key on its last line, stores only its digest; revoke ends it', async () => {
    const created = await runMemgate(env, ['keys', 'create', '--agents', `${agentA}*`]);
    expect(created.code).toBe(0);
    const key = created.stdout.trim().split('\n').at(-1)!;
    expect(key).toMatch(/^mg_[a-z0-9]{12}_[A-Za-z0-9_-]{43}$/);
    const keyId = key.slice(3, 15);
    const stored = await env.store.apiKeys.findOne({ _id: keyId });
    expect(stored).toMatchObject({ agents: `${agentA}*` });
    expect(JSON.stringify(stored)).not.toContain(key.slice(16));
    expect((await call(key, 'POST', `/v1/agents/${agentA}/recall`, { query: 'x' })).status).toBe(200);
    const listed = await runMemgate(env, ['keys', 'list']);
    expect(listed.stdout).toContain(keyId);
    expect(listed.stdout).not.toContain(key.slice(16));
    expect((await runMemgate(env, ['keys', 'revoke', keyId])).code).toBe(0);
    expect((await call(key, 'POST', `/v1/agents/${agentA}/recall`, { query: 'x' })).status).toBe(401);
    const again = await runMemgate(env, ['keys', 'revoke', keyId]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/\[NotFound\]/);
    const bad = await runMemgate(env, ['keys', 'create', '--agents', 'a b']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--agents/);
  });
});
