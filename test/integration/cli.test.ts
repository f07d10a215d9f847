import { describe, expect, it } from 'vitest';
import { runMemgate } from '../support/cli';
import { untilEmbedded } from '../support/embedded';
import { useTestEnv } from '../support/env';

const env = useTestEnv();

const memgate = (...args: string[]) => runMemgate(env, args);

describe('memgate CLI', () => {
  it('writes and recalls', async () => {
    const agent = env.agent('cli');
    const w = await memgate(
      'write',
      '--agent',
      agent,
      '--kind',
      'fact',
      '--salience',
      '0.8',
      'Rate limit is 600 requests per minute',
    );
    expect(w.code).toBe(0);
    const written = JSON.parse(w.stdout) as { entries: { id: string; status: string }[] };
    expect(written.entries[0]!.status).toBe('created');
    const r = await memgate('recall', '--agent', agent, 'rate limit');
    expect(r.code).toBe(0);
    const recalled = JSON.parse(r.stdout) as { hits: { id: string; text: string }[] };
    expect(recalled.hits.map((h) => h.id)).toEqual([written.entries[0]!.id]);
  });

  it("a one-shot recall waits for the agent's vector index, whatever MEMGATE_RECALL_INDEX_WAIT_MS says", async () => {
    const agentId = env.agent('cli-hybrid');
    const { entries } = await env.client.write({
      agentId,
      entries: [{ text: 'My favourite colour is teal.' }],
    });
    await untilEmbedded(
      env.store,
      agentId,
      entries.map((e) => e.id),
    );
    // A serving process would answer this lexically (it waits not at all); the command's
    // process ends after one recall, so it waits for the load.
    const r = await runMemgate(env, ['recall', '--agent', agentId, 'Which hue do I prefer?'], {
      MEMGATE_RECALL_INDEX_WAIT_MS: '0',
    });
    expect(r.code).toBe(0);
    const recalled = JSON.parse(r.stdout) as { retrieval: { mode: string }; hits: { id: string }[] };
    expect(recalled.retrieval.mode).toBe('hybrid');
    expect(recalled.hits.map((h) => h.id)).toEqual([entries[0]!.id]);
  });

  it('exits 2 with the typed error on bad input, and writes nothing', async () => {
    const agent = env.agent('cli-bad');
    const bad = await memgate('write', '--agent', agent, '--salience', '1.5', 'too salient');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('[InvalidInput]');
    expect(bad.stderr).toContain('salience');
    const nan = await memgate('write', '--agent', agent, '--salience', 'abc', 'not a number');
    expect(nan.code).toBe(2);
    const dollar = await memgate('recall', '--agent', '$where', 'x');
    expect(dollar.code).toBe(2);
    const missing = await memgate('write', '--agent', agent, '--json', 'no-such-entries.json');
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('[InvalidInput]');
    expect(missing.stderr).toContain('--json: cannot open no-such-entries.json (ENOENT)');
    // A directory opens, and fails only as it is read.
    const folder = await memgate('import', '--agent', agent, '--file', '.');
    expect(folder.code).toBe(2);
    expect(folder.stderr).toContain('[InvalidInput]');
    expect(folder.stderr).toContain('--file: cannot open . (EISDIR)');
    expect(await env.store.hot.countDocuments({ agentId: agent })).toBe(0);
  });

  it('exits 2 naming the variable when the configuration is invalid', async () => {
    const res = await runMemgate(env, ['stack', 'status'], { MEMGATE_GATE_THRESHOLD: '2' });
    expect(res.code).toBe(2);
    expect(res.stderr).toContain('MEMGATE_GATE_THRESHOLD');
  });

  it('reports the stack status', async () => {
    const res = await memgate('stack', 'status');
    expect(res.code).toBe(0);
    expect(JSON.parse(res.stdout)).toMatchObject({ endpoints: { temporalAddress: expect.any(String) } });
  });

  it('wakes the running agent memories with hand-over, which take writes on as before', async () => {
    const agent = env.agent('cli-hand-over');
    expect((await memgate('write', '--agent', agent, 'The boiler is serviced in May')).code).toBe(0);
    // Listed once the server's visibility has the run (a moment after its start).
    let woken = 0;
    for (let attempt = 0; attempt < 20 && woken === 0; attempt++) {
      const res = await memgate('hand-over');
      expect(res.code).toBe(0);
      woken = (JSON.parse(res.stdout) as { woken: number }).woken;
    }
    expect(woken).toBeGreaterThan(0);
    const again = await memgate('write', '--agent', agent, 'The chimney is swept in June');
    expect(JSON.parse(again.stdout)).toMatchObject({ entries: [{ status: 'created' }] });
  });
});
