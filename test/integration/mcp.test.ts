import { randomUUID } from 'node:crypto';
import { dirname, join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpServer, type RunningServer } from '../../cli/commands/serve';
import { MAX_MCP_BATCH } from '../../server/mcpHttp';
import { createKey } from '../../store/keys';
import { runMemgate } from '../support/cli';
import { startTestEnv, type TestEnv } from '../support/env';

/**
 * The MCP server (docs/interfaces.md, MCP) against the real stack, driven by the MCP SDK's own client
 * over both transports: Streamable HTTP at `/mcp` of a listening `memgate serve`, and stdio
 * of a `memgate mcp` process. Each call is checked against the key's scope: the key here
 * covers one agent (and the window sessions named after it), and nothing else.
 */

const CLI = join(__dirname, '..', '..', 'bin', 'memgate.cjs');
const TOOLS = [
  'remember',
  'recall',
  'forget',
  'forget_agent',
  'restore',
  'window_open',
  'window_show',
  'window_admit',
  'window_rehydrate',
  'window_pin',
  'window_unpin',
  'window_turn',
  'window_close',
];

let env: TestEnv;
let server: RunningServer;
let agent: string;
let key: string;

beforeAll(async () => {
  env = await startTestEnv();
  server = await startHttpServer(env.client, env.config, { port: 0 });
  agent = env.agent('mcp');
  key = (await createKey(env.store, `${agent}*`, Date.now())).key;
});

afterAll(async () => {
  await server?.close();
  await env?.close();
});

async function overHttp(): Promise<Client> {
  const client = new Client({ name: 'memgate-test', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${key}` } },
    }),
  );
  return client;
}

async function overStdio(): Promise<Client> {
  const client = new Client({ name: 'memgate-test', version: '1.0.0' });
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined),
  );
  await client.connect(
    new StdioClientTransport({
      command: 'node',
      args: [CLI, 'mcp'],
      env: {
        ...inherited,
        TEMPORAL_ADDRESS: env.endpoints.temporalAddress,
        MONGODB_URI: env.endpoints.mongoUri,
        MEMGATE_DB: env.config.database,
        MEMGATE_TASK_QUEUE: env.config.taskQueue,
        MEMGATE_API_KEY: key,
        // A directory of its own, as every process needs (vectorEngine/persisted.ts, keepDirectory).
        MEMGATE_VECTOR_INDEX_DIR: join(dirname(env.config.vectorIndexDir), `mcp-${randomUUID()}`),
      },
      stderr: 'inherit',
    }),
  );
  return client;
}

interface ToolAnswer {
  isError: boolean;
  text: string;
  json: unknown;
  structured: Record<string, unknown> | undefined;
}

async function call(client: Client, name: string, args: Record<string, unknown>): Promise<ToolAnswer> {
  const result = await client.callTool({ name, arguments: args });
  const content = result.content as { type: string; text: string }[];
  expect(content[0]!.type).toBe('text');
  const text = content[0]!.text;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return {
    isError: result.isError === true,
    text,
    json,
    structured: result.structuredContent as Record<string, unknown> | undefined,
  };
}

describe.each([
  ['Streamable HTTP', overHttp],
  ['stdio', overStdio],
])('the MCP server over %s', (transport, connect) => {
  let client: Client;
  const tag = transport === 'stdio' ? 'stdio' : 'http';
  beforeAll(async () => {
    client = await connect();
  });
  afterAll(async () => {
    await client?.close();
  });

  it('lists every tool, each with a description and an input schema', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([...TOOLS].sort());
    for (const t of tools) {
      expect(t.description, t.name).toMatch(/\w{3,}/);
      expect(t.inputSchema.type, t.name).toBe('object');
      expect(Object.keys(t.inputSchema.properties ?? {}).length, t.name).toBeGreaterThan(0);
    }
    const recall = tools.find((t) => t.name === 'recall')!;
    expect(Object.keys(recall.inputSchema.properties!)).toEqual(
      expect.arrayContaining(['agentId', 'query', 'k', 'deep']),
    );
    expect(recall.inputSchema.required).toEqual(expect.arrayContaining(['agentId', 'query']));
  });

  it('remembers, recalls (gated and deep, with `missing`), forgets and restores', async () => {
    const agentId = `${agent}-${tag}`;
    const remembered = await call(client, 'remember', {
      agentId,
      text: 'The staging database password rotates every Friday.',
      kind: 'fact',
      salience: 0.9,
    });
    expect(remembered.isError).toBe(false);
    const { entries } = remembered.json as { entries: { id: string; status: string }[] };
    expect(entries).toEqual([{ id: expect.any(String), status: 'created' }]);
    expect(remembered.structured).toEqual(remembered.json);
    const id = entries[0]!.id;

    const several = await call(client, 'remember', {
      agentId,
      entries: [{ text: 'Deploys freeze on the last day of the quarter.' }, { text: 'Alice owns billing.' }],
    });
    expect((several.json as { entries: unknown[] }).entries).toHaveLength(2);

    const recalled = await call(client, 'recall', { agentId, query: 'staging database password' });
    expect(recalled.isError).toBe(false);
    const gated = recalled.json as { hits: { id: string; text: string }[]; missing?: unknown };
    expect(gated.hits[0]).toMatchObject({ id, text: expect.stringContaining('rotates every Friday') });
    expect(gated.missing).toBeUndefined();

    const forgotten = await call(client, 'forget', { agentId, entryId: id });
    expect(forgotten.isError).toBe(false);
    expect(forgotten.json).toMatchObject({ entryId: id, tiers: ['hot'] });

    // Erasure leaves a tombstone without the entry's terms: deep recall reports `missing`,
    // and the erased entry is neither a hit nor a match.
    const deep = await call(client, 'recall', { agentId, query: 'staging database password', deep: true });
    const deepResult = deep.json as { hits: { id: string }[]; missing: unknown[] };
    expect(deepResult.missing).toEqual([]);
    expect(deepResult.hits.map((h) => h.id)).not.toContain(id);

    const again = await call(client, 'forget', { agentId, entryId: 'never-written' });
    expect(again.isError).toBe(true);
    expect(again.text).toMatch(/^NotFound: /);

    // Nothing superseded it: restore is a typed Conflict (or NotFound for the erased entry).
    const restored = await call(client, 'restore', {
      agentId,
      entryId: (several.json as { entries: { id: string }[] }).entries[0]!.id,
    });
    expect(restored.isError).toBe(true);
    expect(restored.text).toMatch(/^Conflict: /);
  });

  it('refuses an agent outside the key, with Forbidden, and writes nothing', async () => {
    const other = env.agent(`mcp-other-${tag}`);
    const refused = await call(client, 'remember', { agentId: other, text: 'This must not be stored.' });
    expect(refused.isError).toBe(true);
    expect(refused.text).toMatch(/^Forbidden: key \w+ does not cover agent /);
    expect(refused.structured).toMatchObject({ error: { type: 'Forbidden' } });
    expect(await env.store.hot.countDocuments({ agentId: other })).toBe(0);
    for (const [name, args] of [
      ['recall', { agentId: other, query: 'anything at all' }],
      ['forget', { agentId: other, entryId: 'some-entry' }],
      ['restore', { agentId: other, entryId: 'some-entry' }],
      ['window_open', { sessionId: other }],
    ] as const) {
      const answer = await call(client, name, args);
      expect(answer.isError, name).toBe(true);
      expect(answer.text, name).toMatch(/^Forbidden: /);
    }
  });

  it('refuses a field of one entry given beside `entries`, and writes nothing', async () => {
    const agentId = `${agent}-beside-${tag}`;
    for (const beside of [{ kind: 'fact', salience: 0.9 }, { text: 'one' }, { source: { origin: 'user' } }]) {
      const refused = await call(client, 'remember', { agentId, entries: [{ text: 'hi' }], ...beside });
      expect(refused.isError, JSON.stringify(beside)).toBe(true);
      expect(refused.structured).toMatchObject({
        error: {
          type: 'InvalidInput',
          details: { issues: Object.keys(beside).map((path) => expect.objectContaining({ path })) },
        },
      });
    }
    expect(await env.store.hot.countDocuments({ agentId })).toBe(0);
  });

  it('refuses a remember with neither `text` nor `entries`, naming `text`', async () => {
    const refused = await call(client, 'remember', { agentId: `${agent}-empty-${tag}` });
    expect(refused.structured).toMatchObject({
      error: { type: 'InvalidInput', details: { issues: [expect.objectContaining({ path: 'text' })] } },
    });
    expect(refused.text).toMatch(/give text/);
  });

  it('answers a rejected input as an InvalidInput tool error naming the field', async () => {
    const bad = await call(client, 'recall', { agentId: agent, query: 'anything', k: 0 });
    expect(bad.isError).toBe(true);
    expect(bad.text).toMatch(/^InvalidInput: invalid recall: k: /);
    expect(bad.structured).toMatchObject({
      error: { type: 'InvalidInput', details: { issues: [expect.objectContaining({ path: 'k' })] } },
    });
    // A field the tool does not take, and a call with no arguments, are refused the same way.
    const unknown = await call(client, 'window_show', { sessionId: agent, extra: 1 });
    expect(unknown.structured).toMatchObject({ error: { type: 'InvalidInput' } });
    const none = await call(client, 'forget', {});
    expect(none.structured).toMatchObject({ error: { type: 'InvalidInput' } });
    expect(none.text).toMatch(/^InvalidInput: .*agentId/);
    const nameless = await call(client, 'no_such_tool', {});
    expect(nameless.structured).toMatchObject({ error: { type: 'NotFound' } });
  });

  it('runs a context window, and a refused rehydration is a tool error naming the pins', async () => {
    const sessionId = `${agent}-window-${tag}`;
    const opened = await call(client, 'window_open', { sessionId, capacity: 1000 });
    expect(opened.json).toMatchObject({ turn: 0, used: 0, free: 1000 });
    expect(
      (await call(client, 'window_admit', { sessionId, segmentId: 'a', tokens: 600, salience: 0.5 })).isError,
    ).toBe(false);
    // b is pinned and pushes a out: a may not come back over it while the pin holds.
    const b = await call(client, 'window_admit', {
      sessionId,
      segmentId: 'b',
      tokens: 600,
      salience: 0.7,
      pin: { kind: 'explicit' },
    });
    expect((b.json as { evicted: { segmentId: string }[] }).evicted.map((e) => e.segmentId)).toEqual(['a']);

    const refused = await call(client, 'window_rehydrate', { sessionId, segmentId: 'a', salience: 0.95 });
    expect(refused.isError).toBe(true);
    expect(refused.text).toMatch(/^RehydrationBlocked: rehydrate of a refused/);
    expect(refused.text).toContain('pins involved: b (');
    expect(refused.structured).toMatchObject({
      error: {
        type: 'RehydrationBlocked',
        details: {
          reasons: ['evictedByLivePin', 'wouldDisplacePinned'],
          pins: [{ segmentId: 'b', pin: { kind: 'explicit' } }],
        },
      },
    });

    const unpinned = await call(client, 'window_unpin', { sessionId, segmentId: 'b' });
    expect(unpinned.json).toEqual({ released: [{ segmentId: 'b', pin: { kind: 'explicit' } }] });
    const pinned = await call(client, 'window_pin', {
      sessionId,
      segmentId: 'b',
      pin: { kind: 'untilTurn', expiresAtTurn: 1 },
    });
    expect(pinned.json).toMatchObject({ id: 'b', pins: [{ kind: 'untilTurn', expiresAtTurn: 1 }] });
    const turn = await call(client, 'window_turn', { sessionId });
    expect(turn.json).toEqual({
      turn: 1,
      lapsed: [{ segmentId: 'b', pin: { kind: 'untilTurn', expiresAtTurn: 1 } }],
    });
    const shown = await call(client, 'window_show', { sessionId });
    expect(shown.json).toMatchObject({ turn: 1, used: 600 });
    const closed = await call(client, 'window_close', { sessionId });
    expect(closed.json).toMatchObject({ turn: 1, segments: 1, used: 600 });
    expect((await call(client, 'window_turn', { sessionId })).text).toMatch(/^Conflict: /);
  });
});

describe('the MCP endpoint over HTTP', () => {
  const initialize = {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
  };
  const post = (headers: Record<string, string>) =>
    fetch(`${server.url}/mcp`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...headers,
      },
      body: JSON.stringify(initialize),
    });

  it('answers 401 Unauthenticated without a live key, and runs nothing', async () => {
    for (const headers of [{}, { authorization: 'Bearer mg_notakey' }] as Record<string, string>[]) {
      const res = await post(headers);
      expect(res.status).toBe(401);
      expect(await res.json()).toMatchObject({ error: { type: 'Unauthenticated' } });
    }
  });

  it('refuses a batch of more than MAX_MCP_BATCH messages, and runs none of them', async () => {
    const agentId = env.agent('mcp-batch');
    const remember = (id: number) => ({
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: { name: 'remember', arguments: { agentId, entries: [{ text: `Batch note ${id}.` }] } },
    });
    const res = await fetch(`${server.url}/mcp`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${key}`,
      },
      body: JSON.stringify(Array.from({ length: MAX_MCP_BATCH + 1 }, (_, i) => remember(i + 1))),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({
      jsonrpc: '2.0',
      error: { message: expect.stringMatching(/^Invalid Request/) },
    });
    expect(await env.store.hot.countDocuments({ agentId })).toBe(0);
  });

  it('answers GET and DELETE with 405: it keeps no sessions', async () => {
    for (const method of ['GET', 'DELETE']) {
      const res = await fetch(`${server.url}/mcp`, { method, headers: { authorization: `Bearer ${key}` } });
      expect(res.status, method).toBe(405);
    }
  });
});

describe('`memgate mcp`', () => {
  it('needs MEMGATE_API_KEY, and a live key, before it serves', async () => {
    const none = await runMemgate(env, ['mcp'], { MEMGATE_API_KEY: '' });
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('[InvalidConfig]');
    expect(none.stderr).toContain('MEMGATE_API_KEY');
    const unknown = await runMemgate(env, ['mcp'], { MEMGATE_API_KEY: 'mg_notakey' });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('[Unauthenticated]');
    expect(unknown.stdout).toBe('');
  });
});
