import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverDeps } from '../../cli/commands/serve';
import { censusAsOf } from '../../core/census';
import type { WriteEntryInput } from '../../core/entry';
import { consolidateAgentWorkflowId } from '../../core/ids';
import { DAY_MS, HOUR_MS } from '../../core/salience';
import { requireKey } from '../../server/auth';
import { buildHttpServer } from '../../server/http';
import {
  agentListSchema,
  agentViewSchema,
  auditRunSchema,
  entryListSchema,
  entryViewSchema,
  errorSchema,
  nightListSchema,
} from '../../server/schemas';
import { recordAuditRun } from '../../store/browse';
import { createKey, revokeKey } from '../../store/keys';
import { expectCensusKept, recountCensus } from '../support/census';
import { startTestEnv, type TestEnv } from '../support/env';

/**
 * The memory browser's reads over HTTP (docs/browser.md), against the real stack: an agent's
 * census, kept by the store as its entries change, equals the census counted from scratch
 * after a night that expires, supersedes, summarises, spills and evicts, and after forget and
 * restore; its nights carry their counts, times and census; its entries list once each,
 * page after page; an entry's page has its lifecycle and its stand-in; and every read is
 * refused to a key that does not cover the agent.
 */

/** A hot tier of 8 entries that reclaims down to 4, a refresh window of a day. */
const SETTINGS = {
  MEMGATE_HALF_LIFE_HOURS: '72',
  MEMGATE_GATE_THRESHOLD: '0.15',
  MEMGATE_RECLAIM_FLOOR: '0.05',
  MEMGATE_REFRESH_WINDOW_HOURS: '24',
  MEMGATE_HOT_CAPACITY: '8',
  MEMGATE_HIGH_WATERMARK: '1',
  MEMGATE_LOW_WATERMARK: '0.5',
};

let env: TestEnv;
let app: FastifyInstance;
let agent: string;
let other: string;
let key: string;
let keyAll: string;
// An hour back, so the night is not in the future.
const asOf = Date.now() - HOUR_MS;
const ids: Record<string, string> = {};

const TOPICS = [
  'printer toner reorder',
  'parking permit renewal',
  'team offsite catering',
  'laptop firmware rollout',
  'badge reader outage',
  'fire drill schedule',
  'kitchen dishwasher repair',
  'conference room booking',
];

beforeAll(async () => {
  env = await startTestEnv(SETTINGS);
  app = buildHttpServer(serverDeps(env.client, env.config), {
    authenticate: requireKey((k) => env.client.authenticate(k)),
  });
  await app.ready();
  agent = env.agent('browsed');
  other = env.agent('elsewhere');
  key = (await createKey(env.store, agent, Date.now())).key;
  keyAll = (await createKey(env.store, '*', Date.now())).key;
  const write = async (name: string, entry: WriteEntryInput) => {
    const { entries } = await env.client.write({
      agentId: agent,
      entries: [{ ...entry, idempotencyKey: name }],
    });
    ids[name] = entries[0]!.id;
  };
  // Two near-duplicates, long gated: summarised tonight, then dead and evicted.
  await write('draft-a', {
    text: 'The vendor contract renewal is due on 12 May with a 30 day notice.',
    salience: 0.3,
    writtenAt: asOf - 20 * DAY_MS,
  });
  await write('draft-b', {
    text: 'Vendor contract renewal is due on 12 May with a 30 day notice.',
    salience: 0.3,
    writtenAt: asOf - 20 * DAY_MS + 1,
  });
  for (const [i, topic] of TOPICS.entries()) {
    await write(`note-${i}`, {
      text: `Note about the ${topic}.`,
      salience: 0.2,
      writtenAt: asOf - 10 * DAY_MS + i,
    });
  }
  await write('quota-old', {
    text: 'The storage quota of the team is 2 TB.',
    kind: 'fact',
    salience: 0.9,
    subject: 'team',
    attribute: 'storage quota',
    writtenAt: asOf - 5 * HOUR_MS,
  });
  await write('quota-new', {
    text: 'The storage quota of the team is 4 TB.',
    kind: 'fact',
    salience: 0.9,
    subject: 'team',
    attribute: 'storage quota',
    writtenAt: asOf - 4 * HOUR_MS,
  });
  await write('price', {
    text: 'The spot price of a GPU hour is 2 dollars.',
    kind: 'fact',
    salience: 0.9,
    volatile: true,
    freshUntil: asOf - 2 * HOUR_MS,
    writtenAt: asOf - 3 * HOUR_MS,
  });
  await write('recent', {
    text: 'The design review moved to Thursday.',
    salience: 0.9,
    writtenAt: asOf - HOUR_MS,
  });
  await env.client.write({ agentId: other, entries: [{ text: 'Another agent keeps this.' }] });
  await env.client.consolidate({ agentId: agent, asOf });
}, 300_000);

afterAll(async () => {
  await app?.close();
  await env?.close();
});

/** A GET with this key (`null`: none). */
async function get(url: string, as: string | null = key) {
  const res = await app.inject({
    method: 'GET',
    url,
    ...(as !== null && { headers: { authorization: `Bearer ${as}` } }),
  });
  return { status: res.statusCode, body: res.json() as unknown };
}

describe("an agent's census", () => {
  it('is what counting every entry and tombstone from scratch gives, after a night that did every move', async () => {
    const { body } = await get(`/v1/agents/${agent}/nights`);
    const [night] = nightListSchema.parse(body).nights;
    expect(night!.counts).toMatchObject({ expired: 1, superseded: 1, summarised: 1 });
    expect(night!.counts.spilled).toBeGreaterThan(0);
    expect(night!.counts.evicted).toBe(2);
    await expectCensusKept(env.store, agent);
    // The night recorded the census the store held when it ended.
    expect(night!.census).toEqual(censusAsOf(await recountCensus(env.store, agent), asOf));
  });

  it('follows forget and restore, and the agent opens with it', async () => {
    await env.client.forget({ agentId: agent, entryId: ids['note-0']! });
    await env.client.restore({ agentId: agent, entryId: ids['quota-old']! });
    await env.client.forget({ agentId: agent, entryId: ids['recent']! });
    await expectCensusKept(env.store, agent);

    const opened = await get(`/v1/agents/${agent}`);
    expect(opened.status).toBe(200);
    const { census, policy } = agentViewSchema.parse(opened.body);
    expect(policy).toEqual({ halfLifeHours: 72, gateThreshold: 0.15 });
    expect(census.hot.expired).toBe(1);
    expect(census.hot.superseded).toBe(0);
    expect(census.summaries).toEqual({ lossy: 0, lossless: 1 });
    expect(census.tombstones).toEqual({
      'dormant, window elapsed, subsumed by a lossless summary': 2,
      erased: 2,
    });
    const counted = census.hot.active + census.hot.reachingGate + census.hot.dormant;
    expect(counted + census.hot.superseded + census.hot.expired + census.hot.inactive + census.cold).toBe(
      (await env.store.hot.countDocuments({ agentId: agent })) +
        (await env.store.cold.countDocuments({ agentId: agent })),
    );
  });
});

describe("an agent's nights", () => {
  it('carry each phase time, the census of the night and the workflow that ran it', async () => {
    const { nights, next } = nightListSchema.parse((await get(`/v1/agents/${agent}/nights?limit=5`)).body);
    expect(next).toBeUndefined();
    expect(nights).toHaveLength(1);
    const [night] = nights;
    expect(night!.workflowId).toBe(consolidateAgentWorkflowId(agent, asOf));
    expect(Object.keys(night!.durations ?? {})).toEqual([
      'expire',
      'refresh',
      'supersede',
      'consolidate',
      'reclaim',
      'embed',
    ]);
    expect(night!.census!.asOf).toBe(asOf);
  });
});

describe("an agent's nights, asked with a before or limit that is not a whole number", () => {
  it('are refused InvalidInput naming it, never listed as if before were 0', async () => {
    for (const query of ['before=', 'before=%20', 'before=1e3', 'before=0x10', 'limit=', 'limit=1e1']) {
      const res = await get(`/v1/agents/${agent}/nights?${query}`);
      const { error } = errorSchema.parse(res.body);
      expect([query, res.status, error.type]).toEqual([query, 400, 'InvalidInput']);
      expect((error.details.issues as { path: string }[]).map((i) => i.path)).toEqual([query.split('=')[0]]);
    }
    const page = nightListSchema.parse((await get(`/v1/agents/${agent}/nights?before=${asOf + 1}`)).body);
    expect(page.nights.map((n) => n.asOf)).toEqual([asOf]);
  });
});

describe("an agent's entries", () => {
  it('list once each, in id order, page after page, both tiers', async () => {
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let pages = 0; pages < 20; pages++) {
      const res = await get(`/v1/agents/${agent}/memories?limit=3${cursor ? `&cursor=${cursor}` : ''}`);
      expect(res.status).toBe(200);
      const page = entryListSchema.parse(res.body);
      expect(page.entries.length).toBeLessThanOrEqual(3);
      seen.push(...page.entries.map((e) => e.id));
      cursor = page.next;
      if (!cursor) break;
    }
    const stored = [
      ...(await env.store.hot.find({ agentId: agent }).toArray()),
      ...(await env.store.cold.find({ agentId: agent }).toArray()),
    ].map((e) => e._id);
    expect(seen).toEqual([...new Set(stored)].sort());
  });

  it('refuses a cursor it did not give', async () => {
    const res = await get(`/v1/agents/${agent}/memories?cursor=1.64`);
    expect(res.status).toBe(400);
    expect(errorSchema.parse(res.body).error.type).toBe('InvalidInput');
  });
});

describe("an entry's page", () => {
  it('shows a fact superseded and spilled by the night, then restored, with its lifecycle', async () => {
    const { entry, lifecycle } = entryViewSchema.parse(
      (await get(`/v1/agents/${agent}/memories/${ids['quota-old']}`)).body,
    );
    expect(entry).toMatchObject({
      text: 'The storage quota of the team is 2 TB.',
      isActive: true,
      tier: 'cold',
    });
    expect(lifecycle.map((e) => e.event)).toEqual(['written', 'supersede', 'spill', 'restore']);
  });

  it('shows an evicted entry as its tombstone, with the summary standing in and the atoms it keeps', async () => {
    const { entry, tombstone, lifecycle, standIns } = entryViewSchema.parse(
      (await get(`/v1/agents/${agent}/memories/${ids['draft-a']}`)).body,
    );
    expect(entry).toBeUndefined();
    expect(tombstone?.reason).toBe('dormant, window elapsed, subsumed by a lossless summary');
    expect(lifecycle.map((e) => e.event)).toEqual(['summarised into', 'evict']);
    expect(standIns).toHaveLength(1);
    expect(standIns[0]).toMatchObject({ lossy: false, lacks: [] });
    expect(standIns[0]!.keeps.length).toBeGreaterThan(0);
  });

  it('is not found for an id the agent never had', async () => {
    const res = await get(`/v1/agents/${agent}/memories/nosuchentry`);
    expect(res.status).toBe(404);
    expect(errorSchema.parse(res.body).error.type).toBe('NotFound');
  });
});

describe('keys', () => {
  it("list only the agents they cover; every read of another agent is 403, and the audit needs a key for '*'", async () => {
    const mine = agentListSchema.parse((await get('/v1/agents')).body);
    expect(mine.agents.map((a) => a.agentId)).toEqual([agent]);
    const all = agentListSchema.parse((await get('/v1/agents', keyAll)).body);
    expect(all.agents.map((a) => a.agentId)).toEqual([agent, other].sort());
    for (const url of [
      `/v1/agents/${other}`,
      `/v1/agents/${other}/nights`,
      `/v1/agents/${other}/memories`,
      `/v1/agents/${other}/memories/${ids['recent']}`,
      '/v1/audit',
    ]) {
      const res = await get(url);
      expect([url, res.status, errorSchema.parse(res.body).error.type]).toEqual([url, 403, 'Forbidden']);
    }
  });

  it('without one, or revoked: 401 and nothing read', async () => {
    expect((await get(`/v1/agents/${agent}`, null)).status).toBe(401);
    const doomed = await createKey(env.store, agent, Date.now());
    expect((await get('/v1/agents', doomed.key)).status).toBe(200);
    await revokeKey(env.store, doomed.keyId, Date.now());
    const res = await get('/v1/agents', doomed.key);
    expect([res.status, errorSchema.parse(res.body).error.type]).toEqual([401, 'Unauthenticated']);
  });
});

describe('the audit', () => {
  it('is not found before a run is recorded, then answers the last run', async () => {
    const none = await get('/v1/audit', keyAll);
    expect([none.status, errorSchema.parse(none.body).error.type]).toEqual([404, 'NotFound']);
    const row = {
      arm: 'fifo',
      budget: 8000,
      readSetting: 'retained' as const,
      condition: 'top-60' as const,
      reader: 'evidence',
      judge: 'match',
      questions: 3,
      denominator: 3,
      errors: 2,
      irreversible: 1,
      recoverable: 1,
      residual: 0,
      negativeRestores: 0,
      irreversibleShare: 0.5,
      interval: null,
      irreversibleRate: 1 / 3,
      goldEvictedRate: 0.4,
      violations: { survivingGoldFixedIrreversible: 0, wholeStoreFixedIrreversible: 0, placeboFlips: 0 },
    };
    await recordAuditRun(env.store, { runId: 'older', at: 1_000, title: 'older', rows: [] });
    await recordAuditRun(env.store, { runId: 'last', at: 2_000, title: 'last', rows: [row] });
    const last = auditRunSchema.parse((await get('/v1/audit', keyAll)).body);
    expect(last).toEqual({ runId: 'last', at: 2_000, title: 'last', rows: [row] });
  });
});
