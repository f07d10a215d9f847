import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverDeps } from '../../cli/commands/serve';
import { requireKey } from '../../server/auth';
import { buildHttpServer } from '../../server/http';
import { buildMcpServer } from '../../server/mcp';
import { createKey } from '../../store/keys';
import { claimForKey } from '../../store/quotas';
import { interleaveOnce } from '../support/faults';
import { startTestEnv, type TestEnv } from '../support/env';

/**
 * Quotas per API key (MEMGATE_KEY_MAX_AGENTS, MEMGATE_KEY_MAX_WINDOWS): an agent is a workflow
 * that runs as long as the agent lives, a window one that runs as long as its session, so a
 * key may create only so many. Past the quota the call is 403 QuotaExceeded and nothing is
 * written; the key writes on for the agents it has, another key is not affected, closing a
 * window and erasing an agent give their place back. Before the quotas, a key created as
 * many as it asked for.
 */
let env: TestEnv;
let app: FastifyInstance;
let key: string;
let other: string;

beforeAll(async () => {
  env = await startTestEnv({ MEMGATE_KEY_MAX_AGENTS: '2', MEMGATE_KEY_MAX_WINDOWS: '1' });
  app = buildHttpServer(serverDeps(env.client, env.config), {
    authenticate: requireKey((k) => env.client.authenticate(k)),
  });
  await app.ready();
  key = (await createKey(env.store, '*', Date.now())).key;
  other = (await createKey(env.store, '*', Date.now())).key;
});
afterAll(async () => {
  await app?.close();
  await env?.close();
});

async function call(as: string, method: 'POST' | 'PUT', url: string, payload: object = {}) {
  const res = await app.inject({ method, url, headers: { authorization: `Bearer ${as}` }, payload });
  return { status: res.statusCode, body: res.json() as { error?: { type: string; details: object } } };
}

const write = (as: string, agentId: string, text: string) =>
  call(as, 'POST', `/v1/agents/${agentId}/memories`, { entries: [{ text }] });

describe('quotas per key', () => {
  it('refuses a write for one agent more, typed, and writes nothing of it', async () => {
    const [a, b, c] = [env.agent('q-a'), env.agent('q-b'), env.agent('q-c')];
    // Concurrent first writes for two agents count each once.
    const first = await Promise.all([
      write(key, a, 'one'),
      write(key, b, 'two'),
      write(key, a, 'three'),
      write(key, b, 'four'),
    ]);
    expect(first.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    const refused = await write(key, c, 'one too many');
    expect(refused.status).toBe(403);
    expect(refused.body.error).toMatchObject({ type: 'QuotaExceeded', details: { kind: 'agent', max: 2 } });
    expect(await env.store.hot.countDocuments({ agentId: c })).toBe(0);
    // The key writes on for its agents; another key is not held by this one's quota.
    expect((await write(key, a, 'still mine')).status).toBe(200);
    expect((await write(other, c, 'from another key')).status).toBe(200);

    // Erasing an agent gives its place back.
    await env.client.eraseAgent({ agentId: b });
    expect((await write(key, c, 'now there is room')).status).toBe(200);
    expect((await write(key, b, 'b again is one too many')).status).toBe(403);
  });

  it('counts no agent for a write refused as invalid, over HTTP', async () => {
    const own = (await createKey(env.store, '*', Date.now())).key;
    // Each passes the body's schema and is refused by the write's own checks.
    for (const n of [1, 2, 3]) {
      const refused = await call(own, 'POST', `/v1/agents/${env.agent(`q-invalid-${n}`)}/memories`, {
        entries: [{ text: 'dated far ahead of now', writtenAt: 8.64e15 }],
      });
      expect(refused.status).toBe(400);
      expect(refused.body.error).toMatchObject({ type: 'InvalidInput' });
    }
    expect((await write(own, env.agent('q-valid-after-invalid'), 'a valid one')).status).toBe(200);
  });

  it('counts no agent for a write refused as invalid, over MCP', async () => {
    const scope = await env.client.authenticate((await createKey(env.store, '*', Date.now())).key);
    const server = buildMcpServer({ ...serverDeps(env.client, env.config), scope: async () => scope });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(serverSide);
    const mcp = new McpClient({ name: 'memgate-test', version: '1.0.0' });
    await mcp.connect(clientSide);
    try {
      const remember = (args: Record<string, unknown>) => mcp.callTool({ name: 'remember', arguments: args });
      for (const n of [1, 2, 3]) {
        const refused = await remember({ agentId: env.agent(`q-mcp-invalid-${n}`) });
        expect(refused.structuredContent).toMatchObject({ error: { type: 'InvalidInput' } });
      }
      const valid = await remember({ agentId: env.agent('q-mcp-valid'), text: 'a valid one' });
      expect(valid.isError).toBeFalsy();
    } finally {
      await mcp.close();
      await server.close();
    }
  });

  it('refuses a window more than the key may hold open, until one closes', async () => {
    const [s1, s2] = [env.agent('session-1'), env.agent('session-2')];
    expect((await call(key, 'PUT', `/v1/windows/${s1}`)).status).toBe(200);
    // Opening the open one again is no second window.
    expect((await call(key, 'PUT', `/v1/windows/${s1}`)).status).toBe(200);
    const refused = await call(key, 'PUT', `/v1/windows/${s2}`);
    expect(refused.status).toBe(403);
    expect(refused.body.error).toMatchObject({ type: 'QuotaExceeded', details: { kind: 'window', max: 1 } });
    expect((await call(key, 'POST', `/v1/windows/${s1}/close`)).status).toBe(200);
    expect((await call(key, 'PUT', `/v1/windows/${s2}`)).status).toBe(200);
  });

  it('gives a window its place back when another key closes it', async () => {
    const opener = (await createKey(env.store, '*', Date.now())).key;
    const [s1, s2] = [env.agent('closed-by-another-1'), env.agent('closed-by-another-2')];
    expect((await call(opener, 'PUT', `/v1/windows/${s1}`)).status).toBe(200);
    expect((await call(other, 'POST', `/v1/windows/${s1}/close`)).status).toBe(200);
    expect((await call(opener, 'PUT', `/v1/windows/${s2}`)).status).toBe(200);
  });

  it("gives a window its place back when its agent's erasure closes it", async () => {
    const opener = (await createKey(env.store, '*', Date.now())).key;
    const agentId = env.agent('q-erased');
    expect((await write(opener, agentId, 'its one note')).status).toBe(200);
    expect((await call(opener, 'PUT', `/v1/windows/${agentId}-chat`)).status).toBe(200);
    await env.client.eraseAgent({ agentId });
    expect((await call(opener, 'PUT', `/v1/windows/${env.agent('after-erasure')}`)).status).toBe(200);
  }, 300_000);

  // A call can be refused, or fail, after its claim was counted: a write the agent's workflow
  // refuses (a stored policy stricter than the client's, a clock behind the client's), one
  // never acknowledged, an open the server did not take. Such a claim holds no agent and no
  // window; left counted, it would lock the key out for good.
  it('takes back, once at the quota, a place that no agent of the key holds', async () => {
    const own = await createKey(env.store, '*', Date.now());
    const [a, b, c] = [env.agent('q-held-a'), env.agent('q-never-written'), env.agent('q-held-c')];
    expect((await write(own.key, a, 'a real agent')).status).toBe(200);
    await leaveClaim(own.keyId, 'agent', b, 2);
    expect((await write(own.key, c, 'the place b never used')).status).toBe(200);
    // Places the key's agents hold are not taken back, however old their claims.
    await ageClaims(own.keyId);
    const refused = await write(own.key, env.agent('q-one-more'), 'one too many');
    expect(refused.status).toBe(403);
    expect(refused.body.error).toMatchObject({ type: 'QuotaExceeded', details: { kind: 'agent', max: 2 } });
    expect((await write(own.key, a, 'a writes on')).status).toBe(200);
  });

  it('takes back no place whose agent a write under way is writing for', async () => {
    const own = await createKey(env.store, '*', Date.now());
    const [a, b, c] = [env.agent('q-busy-a'), env.agent('q-resent-b'), env.agent('q-busy-c')];
    expect((await write(own.key, a, 'a real agent')).status).toBe(200);
    // B's first write was sent long ago and not acknowledged; the caller sends it again, and
    // while that write is under way, a write for C finds the key at its quota.
    await leaveClaim(own.keyId, 'agent', b, 2);
    const forC = await whileWriting(
      own.key,
      b,
      'sent again',
      async () => (await write(own.key, c, 'one too many')).status,
    );
    expect(forC).toBe(403);
  });

  it('takes back no place whose write has been under way longer than half the write deadline', async () => {
    const own = await createKey(env.store, '*', Date.now());
    const [a, b, c] = [env.agent('q-slow-a'), env.agent('q-slow-b'), env.agent('q-slow-c')];
    expect((await write(own.key, a, 'a real agent')).status).toBe(200);
    // B's claim is 0.4 of the deadline old as B's write begins: young enough that the write
    // does not renew it.
    const T = env.config.writeTimeoutMs;
    await leaveClaim(own.keyId, 'agent', b, 2, 0.4 * T);
    const forC = await whileWriting(own.key, b, 'slow, and under way', async () => {
      // The write has been under way 0.7 of the deadline, so within it: the claim is now
      // 1.1 deadlines old (the clock moved for the claim alone) when C finds the quota full.
      await env.store.keyClaims.updateOne(
        { keyId: own.keyId, agentId: b },
        { $set: { at: Date.now() - 1.1 * T } },
      );
      return (await write(own.key, c, 'one too many')).status;
    });
    expect(forC).toBe(403);
    expect((await write(own.key, b, 'b writes on')).status).toBe(200);
  });

  it('takes back, once at the quota, a place that no open window of the key holds', async () => {
    const own = await createKey(env.store, '*', Date.now());
    const [never, open] = [env.agent('never-opened'), env.agent('really-open')];
    await leaveClaim(own.keyId, 'window', never, 1);
    expect((await call(own.key, 'PUT', `/v1/windows/${open}`)).status).toBe(200);
    await ageClaims(own.keyId);
    const refused = await call(own.key, 'PUT', `/v1/windows/${env.agent('one-more')}`);
    expect(refused.status).toBe(403);
    expect(refused.body.error).toMatchObject({ type: 'QuotaExceeded', details: { kind: 'window', max: 1 } });
  });
});

/**
 * A claim counted as a call that failed after its claim leaves it, made `ago` (by default long
 * enough ago to have settled).
 */
async function leaveClaim(
  keyId: string,
  kind: 'agent' | 'window',
  id: string,
  max: number,
  ago = 10 * env.config.writeTimeoutMs,
): Promise<void> {
  const settlesIn = env.config.writeTimeoutMs;
  await claimForKey(env.store, { keyId, kind, id, max, at: Date.now() - ago, settlesIn });
}

/**
 * `meanwhile`'s answer, run while the key's write for `agentId` is under way (as its workflow
 * registers the agent, which it does before the first write); that write must succeed.
 */
async function whileWriting<T>(
  key: string,
  agentId: string,
  text: string,
  meanwhile: () => Promise<T>,
): Promise<T> {
  let answer: T | undefined;
  const undo = interleaveOnce(
    env.worker.store,
    'agents',
    'updateOne',
    async () => {
      answer = await meanwhile();
    },
    (args) => (args[0] as { _id: string })._id === agentId,
  );
  try {
    expect((await write(key, agentId, text)).status).toBe(200);
  } finally {
    undo();
  }
  return answer!;
}

/** Every claim of the key made long enough ago to have settled. */
async function ageClaims(keyId: string): Promise<void> {
  await env.store.keyClaims.updateMany(
    { keyId },
    { $set: { at: Date.now() - 10 * env.config.writeTimeoutMs } },
  );
}
