import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpServer, type RunningServer } from '../../cli/commands/serve';
import { createKey } from '../../store/keys';
import { pythonWithTemporal, runPython } from '../support/python';
import { startTestEnv, type TestEnv } from '../support/env';
import { expectVerified } from '../support/verify';

/**
 * An agent written in Python reaches memgate with the official Temporal SDK alone: an
 * update-with-start to the agent's `agentMemory` workflow and its `write` Update, with a JSON
 * payload, every payload through memgate's codec endpoint; then it recalls over the HTTP API
 * with an API key. The same validator guards it as guards the TypeScript client.
 */
let env: TestEnv;
let python: string;
let server: RunningServer;

beforeAll(async () => {
  env = await startTestEnv();
  python = await pythonWithTemporal(env.config.cacheDir);
  server = await startHttpServer(env.client, env.config, { port: 0 });
}, 900_000);
afterAll(async () => {
  await server?.close();
  await env?.close();
});

/** Through memgate's codec endpoint, with a key of the agent's (docs/erasure.md). */
const write = async (request: { agentId: string; entries: object[] }) =>
  runPython(python, 'write_memory.py', [
    env.endpoints.temporalAddress,
    env.config.temporalNamespace,
    env.config.taskQueue,
    `${server.url}/codec`,
    (await createKey(env.store, request.agentId, Date.now())).key,
    JSON.stringify(request),
  ]);

describe('a Python agent, through the Temporal Python SDK', () => {
  it('writes through the write Update, and recalls over HTTP with its API key', async () => {
    const agentId = env.agent('python');
    const request = {
      agentId,
      entries: [
        {
          text: 'The Lisbon office opens at 08:30 on weekdays.',
          kind: 'fact',
          salience: 0.9,
          idempotencyKey: 'lisbon-hours',
        },
      ],
    };
    const result = (await write(request)) as { entries: { id: string; status: string }[] };
    expect(result.entries).toHaveLength(1);
    expect(result.entries[0]!.status).toBe('created');
    // Through the codec endpoint: the agent's history holds the write only encrypted.
    const history = await env.client.temporal.workflow.getHandle(`memgate-agent-${agentId}`).fetchHistory();
    const raw = JSON.stringify(history, (_, v: unknown) =>
      v instanceof Uint8Array ? Buffer.from(v).toString('utf8') : v,
    );
    expect(raw).not.toContain('Lisbon');
    // Then recalled over the HTTP API with an API key, from Python too.
    const { key } = await createKey(env.store, agentId, Date.now());
    const recalled = (await runPython(python, 'recall_http.py', [
      server.url,
      key,
      agentId,
      'Lisbon office opens',
    ])) as { hits: { id: string; text: string }[] };
    expect(recalled.hits.map((h) => [h.id, h.text])).toEqual([
      [result.entries[0]!.id, 'The Lisbon office opens at 08:30 on weekdays.'],
    ]);
    const otherAgent = await runPython(python, 'recall_http.py', [server.url, key, env.agent('x'), 'Lisbon']);
    expect(otherAgent).toMatchObject({ status: 403, error: { type: 'Forbidden' } });
    // Sent again with the same idempotency key, it is the same entry, not a second one.
    const again = (await write(request)) as { entries: { id: string; status: string }[] };
    expect(again.entries).toEqual([{ id: result.entries[0]!.id, status: 'existing' }]);
    await expectVerified(env, agentId);
  });

  it('gets a typed refusal for a bad payload, and nothing is written', async () => {
    const agentId = env.agent('python-bad');
    const refused = await write({ agentId, entries: [{ text: '', salience: 7 }] });
    expect(refused).toMatchObject({ error: { type: 'InvalidInput' } });
    expect((refused as { error: { message: string } }).error.message).toMatch(/entries\.0\.(text|salience)/);
    expect(await env.store.hot.countDocuments({ agentId })).toBe(0);
  });
});
