import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpServer, type RunningServer } from '../../cli/commands/serve';
import { WindowClient } from '../../client/window';
import { RehydrationBlocked } from '../../core/window/blocked';
import { createKey } from '../../store/keys';
import { freePort } from '../support/cli';
import { startTestEnv, type TestEnv } from '../support/env';

/**
 * One Prometheus endpoint per process (MEMGATE_METRICS_PORT): the Temporal SDK's worker
 * metrics and memgate's own — write acknowledgements, nightly moves, refused rehydrations and
 * the HTTP API's answers — move as the work happens, and no agent id is ever a label.
 */
let env: TestEnv;
let port: number;
let server: RunningServer;

beforeAll(async () => {
  port = await freePort();
  env = await startTestEnv({
    MEMGATE_METRICS_PORT: String(port),
    MEMGATE_HOT_CAPACITY: '10',
    MEMGATE_LOW_WATERMARK: '0.5',
  });
  server = await startHttpServer(env.client, env.config, { port: 0 });
});
afterAll(async () => {
  await server?.close();
  await env?.close();
});

async function scrape(): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${port}/metrics`);
  expect(res.status).toBe(200);
  return res.text();
}

/** The sum over every series of a metric whose labels include all of `labels`. */
function total(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    const m = /^([a-z_:][a-z0-9_:]*)(\{([^}]*)\})? ([0-9.eE+-]+)$/i.exec(line);
    if (!m || m[1] !== name) continue;
    const series = Object.fromEntries(
      [...(m[3] ?? '').matchAll(/([a-z_][a-z0-9_]*)="([^"]*)"/gi)].map((l) => [l[1], l[2]]),
    );
    if (Object.entries(labels).every(([k, v]) => series[k] === v)) sum += Number(m[4]);
  }
  return sum;
}

describe('the Prometheus endpoint', () => {
  it('carries the SDK metrics and memgate counters that move with the work', async () => {
    const before = await scrape();
    const agentId = env.agent('metrics');
    await env.client.write({
      agentId,
      entries: Array.from({ length: 20 }, (_, i) => ({
        text: `Metric note ${i}: ${['amber', 'cedar', 'onyx', 'quartz', 'umber'][i % 5]} crate ${i * 7919}.`,
        salience: 0.9,
      })),
    });
    const report = await env.client.consolidate({ agentId, asOf: Date.now() });
    expect(report.counts.spilled).toBeGreaterThan(0);

    const windows = new WindowClient(env.client.temporal, env.config);
    const session = env.agent('metrics-session');
    await windows.open(session, { capacity: 100 });
    await windows.admit(session, { segmentId: 'table', tokens: 60, salience: 0.9 });
    await windows.admit(session, {
      segmentId: 'dump',
      tokens: 60,
      salience: 0.95,
      pin: { kind: 'explicit' },
    });
    await expect(windows.rehydrate(session, { segmentId: 'table', salience: 0.99 })).rejects.toBeInstanceOf(
      RehydrationBlocked,
    );

    const { key } = await createKey(env.store, agentId, Date.now());
    const recalled = await fetch(`${server.url}/v1/agents/${agentId}/recall`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: '{"query":"metric note"}',
    });
    expect(recalled.status).toBe(200);

    const after = await scrape();
    const moved = (name: string, labels: Record<string, string> = {}) =>
      total(after, name, labels) - total(before, name, labels);
    expect(moved('memgate_write_entries_total', { status: 'created' })).toBe(20);
    expect(moved('memgate_nightly_spilled_total')).toBe(report.counts.spilled);
    expect(moved('memgate_rehydrations_refused_total')).toBeGreaterThanOrEqual(1);
    expect(moved('memgate_http_request_duration_count', { operation: 'recall', status: '2xx' })).toBe(1);
    // The SDK's own worker metrics are on the same endpoint.
    expect(after).toMatch(/^temporal_\w+/m);
    // Bounded labels: no agent or session id in any memgate series.
    const ours = after.split('\n').filter((l) => l.startsWith('memgate_'));
    expect(ours.length).toBeGreaterThan(0);
    for (const line of ours) {
      expect(line).not.toContain(agentId);
      expect(line).not.toContain(session);
    }
  });
});
