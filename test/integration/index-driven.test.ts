import type { Client } from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildEntry, memoryPolicy, type Entry, type WriteEntryInput } from '../../core/entry';
import { semanticDepth } from '../../core/hybrid';
import { inDefaultRecall, rankCandidates } from '../../core/recall';
import { DAY_MS, HOUR_MS } from '../../core/salience';
import { terms } from '../../core/text';
import { adminClient } from '../../stack/postgres';
import { entryId } from '../../core/ids';
import { indexedEntry } from '../../store/entries';
import { untilEmbedded } from '../support/embedded';
import { episode } from '../support/memories';
import { startTestEnv, type TestEnv } from '../support/env';

/**
 * Every hot path is index-driven (docs/invariants.md, Index-driven). In a store of tens of
 * thousands of entries shared by many agents, PostgreSQL's sequential-scan counters of the
 * entries tables do not move across a recall, a deep recall, a write, the tombstone check of
 * a replayed write, one agent's whole nightly run (with work for every phase), a forget and a
 * restore, while their index-scan counters do; a recall fetches its candidates' rows, not the
 * agent's, and so do the memory browser's pages; and recall returns what ranking every entry
 * of the agent returns.
 */

const OTHER_AGENTS = 40;
const PER_OTHER_AGENT = 800;
const SETTINGS = {
  MEMGATE_HOT_CAPACITY: '400',
  MEMGATE_HIGH_WATERMARK: '1',
  MEMGATE_LOW_WATERMARK: '0.8',
};
/** PostgreSQL flushes a backend's statistics within 10 s of it going idle (PGSTAT_IDLE_INTERVAL). */
const STATS_FLUSH_MS = 11_000;

const COLOURS = ['amber', 'cobalt', 'crimson', 'jade', 'ivory', 'onyx', 'coral', 'slate', 'olive', 'plum'];
const ANIMALS = ['heron', 'otter', 'lynx', 'ibis', 'marten', 'gecko', 'tapir', 'quokka', 'civet', 'okapi'];

let env: TestEnv;
let pg: Client;
// Two hours back, so the night the test runs an hour after it is not in the future.
const now = Date.now() - 2 * HOUR_MS;

const postgres = inject('postgres');

beforeAll(async () => {
  if (!postgres) return;
  env = await startTestEnv(SETTINGS);
  pg = await adminClient(postgres, postgres.port);
}, 300_000);
afterAll(async () => {
  await pg?.end();
  await env?.close();
});

/** Sequential and index scans of the agent entries tables of this test's database. */
async function scans(): Promise<{ seq: number; idx: number; fetched: number; tables: number }> {
  const { rows } = await pg.query<{ seq: string; idx: string; fetched: string; tables: string }>(
    `SELECT sum(seq_scan) AS seq, sum(idx_scan) AS idx, sum(idx_tup_fetch) AS fetched, count(*) AS tables
     FROM pg_stat_user_tables
     WHERE schemaname = $1 AND (relname LIKE 'entries\\_hot\\_%' OR relname LIKE 'entries\\_cold\\_%')`,
    [env.config.database],
  );
  return {
    seq: Number(rows[0]!.seq),
    idx: Number(rows[0]!.idx),
    fetched: Number(rows[0]!.fetched),
    tables: Number(rows[0]!.tables),
  };
}

async function settledScans() {
  await new Promise((r) => setTimeout(r, STATS_FLUSH_MS));
  return scans();
}

/** Other tenants' entries, inserted in bulk: the agent under test is a small part of the tables. */
async function loadOtherAgents(): Promise<void> {
  const policy = memoryPolicy(env.config);
  for (let a = 0; a < OTHER_AGENTS; a++) {
    const agentId = env.agent(`tenant-${a}`);
    const entries: Entry[] = Array.from({ length: PER_OTHER_AGENT }, (_, i) =>
      indexedEntry(
        buildEntry(
          entryId(agentId, { idempotencyKey: String(i) }),
          agentId,
          episode(
            `Tenant ${a} note ${i}: the ${COLOURS[i % 10]} ${ANIMALS[(i >> 3) % 10]} ledger line ${i}.`,
            now - i * HOUR_MS,
          ),
          policy,
        ),
      ),
    );
    await env.store.hot.insertMany(entries.slice(0, PER_OTHER_AGENT / 2));
    await env.store.cold.insertMany(entries.slice(PER_OTHER_AGENT / 2));
  }
}

const agentWrites = (agentId: string): WriteEntryInput[][] => {
  const filler = Array.from({ length: 440 }, (_, i) => ({
    text: `Meeting note ${i}: the ${COLOURS[i % 10]} ${ANIMALS[(i >> 2) % 10]} team reviewed item x${i}.`,
    salience: 0.8,
    writtenAt: now - 2 * DAY_MS + i * 60_000,
    idempotencyKey: `${agentId}-filler-${i}`,
  }));
  const special: WriteEntryInput[] = [
    ...['every Tuesday', 'each Tuesday', 'on Tuesdays'].map((when, i) => ({
      text: `Acme ships orders from the Rotterdam warehouse ${when}.`,
      salience: 0.9,
      writtenAt: now - DAY_MS + i * 60_000,
    })),
    {
      text: "The supplier's notice period is 14 days.",
      kind: 'fact' as const,
      subject: 'supplier',
      attribute: 'notice period',
      salience: 0.9,
      writtenAt: now - DAY_MS,
    },
    {
      text: "The supplier's notice period is 30 days.",
      kind: 'fact' as const,
      subject: 'supplier',
      attribute: 'notice period',
      salience: 0.9,
      writtenAt: now - HOUR_MS,
    },
    {
      text: 'The staging gateway token is valid for the demo only.',
      kind: 'fact' as const,
      volatile: true,
      freshUntil: now - 2 * HOUR_MS,
      salience: 0.9,
      writtenAt: now - DAY_MS,
    },
  ];
  const all = [...filler, ...special];
  return Array.from({ length: Math.ceil(all.length / 100) }, (_, i) => all.slice(i * 100, i * 100 + 100));
};

// Against configured servers there is no PostgreSQL to ask; MongoDB serves the same
// declarations (store/db.ts INDEXES) from its own indexes.
describe.skipIf(!postgres)('every hot path is index-driven (the local stack)', () => {
  it('moves no sequential-scan counter of the entries tables, and recalls what a full ranking recalls', async () => {
    const agentId = env.agent('indexed');
    await loadOtherAgents();
    const ids: string[] = [];
    for (const batch of agentWrites(agentId)) {
      ids.push(...(await env.client.write({ agentId, entries: batch })).entries.map((e) => e.id));
    }
    // The agent's workflow embeds and settles the entries after the writes are acknowledged.
    await untilEmbedded(env.store, agentId, ids);
    const query = 'Rotterdam warehouse orders';
    // The reference: every entry of the agent read (a scan, before the counters are taken),
    // filtered by the gate and ranked by the core.
    const everything = await env.store.hot.find({ agentId }).toArray();
    const expected = rankCandidates(
      terms(query),
      everything
        .filter((e) => inDefaultRecall(e, now) && e.terms.some((t) => terms(query).includes(t)))
        .map((entry) => ({ entry, tier: 'hot' as const })),
      { now, k: 10, ...memoryPolicy(env.config) },
    );
    expect(expected.length).toBe(3);
    // The planner decides with the statistics a running store has.
    const tables = await pg.query<{ relname: string }>(
      `SELECT relname FROM pg_stat_user_tables WHERE schemaname = $1`,
      [env.config.database],
    );
    for (const { relname } of tables.rows) await pg.query(`ANALYZE "${env.config.database}"."${relname}"`);

    const before = await settledScans();
    expect(before.tables).toBe(2);

    const recalled = await env.client.recall({ agentId, query, k: 10, asOf: now });
    expect(recalled.retrieval.mode).toBe('hybrid');
    // What the words found is what the full lexical ranking finds; neighbours by meaning
    // (the nearest of the agent's vectors, an index in this process) may join it.
    expect(
      recalled.hits
        .filter((h) => h.foundBy !== 'semantic')
        .map((h) => h.id)
        .sort(),
    ).toEqual(expected.map((h) => h.id).sort());
    // A recall reads the postings of its terms (a few entries here) and its nearest
    // neighbours by `_id`, not the agent's store.
    const afterRecall = await settledScans();
    expect(afterRecall.fetched - before.fetched).toBeLessThanOrEqual(
      5 * expected.length + 2 * semanticDepth(10),
    );

    const deep = await env.client.recall({ agentId, query: 'supplier notice period', deep: true, asOf: now });
    expect(deep.hits.length).toBeGreaterThanOrEqual(2);
    const written = await env.client.write({
      agentId,
      entries: [{ text: 'The Rotterdam warehouse closes at six.', salience: 0.9 }],
    });
    expect(written.entries[0]!.status).toBe('created');

    const report = await env.client.consolidate({ agentId, asOf: now + HOUR_MS });
    expect(report.counts.expired).toBe(1);
    expect(report.counts.summarised).toBeGreaterThanOrEqual(1);
    expect(report.counts.superseded).toBe(1);
    expect(report.counts.spilled).toBeGreaterThan(0);

    // Erasure, and the tombstone check of a replayed write of what was erased.
    const erased = ids[0]!;
    await env.client.forget({ agentId, entryId: erased });
    const replay = await env.client.write({ agentId, entries: [agentWrites(agentId)[0]![0]!] });
    expect(replay.entries[0]).toEqual({ id: erased, status: 'deleted' });
    const older = ids[ids.length - 3]!;
    expect((await env.client.restore({ agentId, entryId: older })).restored).toEqual(['supersession']);

    const after = await settledScans();
    expect(after.idx).toBeGreaterThan(afterRecall.idx);
    expect(after.seq).toBe(before.seq);

    // The memory browser opens the agent from its record, and lists its entries a page of the
    // id space at a time (docs/browser.md): two pages of 50 read about 100 of its rows.
    await env.client.agent({ agentId });
    const first = await env.client.entries({ agentId, limit: 50 });
    expect(first.entries).toHaveLength(50);
    await env.client.entries({ agentId, cursor: first.next!, limit: 50 });
    await env.client.entry({ agentId, entryId: older });
    await env.client.entry({ agentId, entryId: erased });
    await env.client.nights({ agentId });
    const browsed = await settledScans();
    expect(browsed.seq).toBe(before.seq);
    expect(browsed.fetched - after.fetched).toBeLessThanOrEqual(200);
  }, 600_000);
});
