import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoServerError } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemgateClient } from '../../client/client';
import { startHttpServer, type RunningServer } from '../../cli/commands/serve';
import { buildEntry, memoryPolicy, type Entry } from '../../core/entry';
import { DAY_MS, HOUR_MS } from '../../core/salience';
import { registerAgent, tierCounts } from '../../store/agents';
import { entryId } from '../../core/ids';
import { indexedEntry, settledEntry } from '../../store/entries';
import { createKey } from '../../store/keys';
import { derivedFromErased } from '../../store/db';
import { importExport, importedId, type ImportResult } from '../../store/portable';
import type { RecallResult } from '../../store/recall';
import { adjustDocumentFrequencies } from '../../store/terms';
import { runMemgate, runMemgateClosingEarly } from '../support/cli';
import { startTestEnv, type TestEnv } from '../support/env';
import { episode } from '../support/memories';
import { expectCensusKept } from '../support/census';
import { expectVerified } from '../support/verify';
import { spillStep } from '../support/reclaimSteps';
import { failOnce, interleaveOnce } from '../support/faults';
import { spillEntries } from '../../store/nightly';

/**
 * `memgate export` and `memgate import` (docs/export.md) on the real stack. The source agent
 * lived through the lifecycle (nights that summarised, spilled and evicted behind a stand-in,
 * a superseded fact, an erasure), then took 10,000 more entries in bulk, as the nights before
 * left them. Its export, imported into a new agent, answers every recall as the source does
 * (hits, scores, missing evidence and successors, each id mapped), and `memgate verify` passes
 * on it; the HTTP export streams the same lines; a malformed line is refused by its number
 * with nothing of it written; an agent that holds entries takes an import only when asked to.
 */

const BULK = 10_000;
/** Twelve days back, so the nights of the lifecycle are in the past. */
const T0 = Math.floor((Date.now() - 12 * DAY_MS) / HOUR_MS) * HOUR_MS;
const dayAt = (day: number, hour: number) => T0 + day * DAY_MS + hour * HOUR_MS;
/** One instant every recall is judged at, so the two agents' salience is the same. */
const AS_OF = dayAt(12, 0);

const COLOURS = ['amber', 'cobalt', 'crimson', 'jade', 'ivory', 'onyx', 'coral', 'slate', 'olive', 'plum'];
const ANIMALS = ['heron', 'otter', 'lynx', 'ibis', 'marten', 'gecko', 'tapir', 'quokka', 'civet', 'okapi'];

/**
 * Queries whose terms each hold a few, a hundred, or a thousand entries, and the lifecycle's;
 * each has a term within the postings budget, so its candidates are the same on both sides.
 */
const QUERIES = [
  'topic17 batch17',
  'topic2250 group10 reviewed',
  'batch42 group2',
  'crimson gecko ledger topic99',
  'courier pickups dock',
  'supplier notice period',
  'office note boiler serviced',
  'lab door code',
];

/** A query whose every term is held by more entries than the postings budget. */
const OVER_BUDGET = 'amber heron';

let env: TestEnv;
let lexical: MemgateClient;
let dir: string;
let source: string;

beforeAll(async () => {
  env = await startTestEnv({
    MEMGATE_HOT_CAPACITY: '6',
    MEMGATE_LOW_WATERMARK: '0.5',
    // `memgate verify` sends a batch's point reads at once, each within the store timeout: on a
    // loaded machine the last of 500 can wait past it, of 100 it does not.
    MEMGATE_NIGHTLY_BATCH: '100',
  });
  // Recall by words only on both sides: vectors are not exported (docs/export.md).
  lexical = await MemgateClient.connect(env.config, {
    ...env.endpoints,
    embeddings: { unavailable: 'export round trip compares lexical recall' },
  });
  dir = mkdtempSync(join(tmpdir(), 'memgate-export-'));
  source = await seedSource('export-source');
}, 600_000);

afterAll(async () => {
  await lexical?.close();
  await env?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Nights that summarise, spill and evict behind a stand-in; a fact superseded; an erasure. */
async function livedIn(agentId: string): Promise<void> {
  const { entries } = await env.client.write({
    agentId,
    entries: [
      { text: 'Courier pickups leave from dock 7 at 16:00.', salience: 0.2, writtenAt: dayAt(0, 9) },
      { text: 'Courier pickups leave from dock 7 at 16:00!', salience: 0.2, writtenAt: dayAt(0, 10) },
      { text: 'The lab door code is 4471.', salience: 0.9, writtenAt: dayAt(0, 11) },
      {
        text: "The supplier's notice period is 14 days.",
        kind: 'fact',
        subject: 'supplier',
        attribute: 'notice period',
        salience: 0.9,
        writtenAt: dayAt(0, 12),
      },
    ],
  });
  await env.client.consolidate({ agentId, asOf: dayAt(1, 3) });
  await env.client.write({
    agentId,
    entries: [
      ...['boiler serviced', 'taxes filed', 'banners ordered', 'notice approved', 'interns start'].map(
        (t, i) => ({ text: `Office note: ${t}.`, salience: 0.9, writtenAt: dayAt(9, 10) + i }),
      ),
      {
        text: "The supplier's notice period is 30 days.",
        kind: 'fact' as const,
        subject: 'supplier',
        attribute: 'notice period',
        salience: 0.9,
        writtenAt: dayAt(9, 11),
      },
    ],
  });
  await env.client.consolidate({ agentId, asOf: dayAt(10, 3) });
  await env.client.forget({ agentId, entryId: entries[2]!.id });
}

/** The bulk: hot and cold, some dormant, the newest still awaiting their night. */
async function seedBulk(agentId: string): Promise<void> {
  const policy = memoryPolicy(env.config);
  const hot: Entry[] = [];
  const cold: Entry[] = [];
  const counted: string[][] = [];
  for (let i = 0; i < BULK; i++) {
    const text =
      `Note ${i}: the ${COLOURS[i % 10]} ${ANIMALS[(i >> 3) % 10]} ledger for topic${i % 2500} ` +
      `batch${i % 100} group${i % 40} reviewed by desk ${i}.`;
    const built = buildEntry(
      entryId(agentId, { idempotencyKey: `bulk-${i}` }),
      agentId,
      { ...episode(text, dayAt(10, 4) + i * 60_000), salience: 0.05 + ((i * 37) % 95) / 100 },
      policy,
    );
    // All but the newest hundred as the nights before left them; those still await their night.
    const settled = i < BULK - 100;
    const e = settled ? settledEntry(built, AS_OF) : indexedEntry(built);
    if (settled) counted.push(e.terms);
    if (i % 4 === 3) cold.push({ ...e, spilledAt: dayAt(11, 3) });
    else hot.push(e);
  }
  for (let i = 0; i < hot.length; i += 1000) await env.store.hot.insertMany(hot.slice(i, i + 1000));
  for (let i = 0; i < cold.length; i += 1000) await env.store.cold.insertMany(cold.slice(i, i + 1000));
  const ids = [...hot, ...cold].map((e) => ({ _id: e._id, agentId }));
  for (let i = 0; i < ids.length; i += 1000) await env.store.entryIds.insertMany(ids.slice(i, i + 1000));
  await adjustDocumentFrequencies(env.store, agentId, counted, 1);
  await registerAgent(env.store, agentId, dayAt(0, 9));
}

async function seedSource(name: string): Promise<string> {
  const agentId = env.agent(name);
  await livedIn(agentId);
  await seedBulk(agentId);
  // What the test relies on is there.
  const count = (collection: 'hot' | 'cold' | 'tombstones', filter: Record<string, unknown>) =>
    env.store[collection].countDocuments({ agentId, ...filter });
  const held = {
    erased: await count('tombstones', { reason: 'erased' }),
    standIns: await count('tombstones', { standIn: { $exists: true } }),
    summaries: (await count('hot', { kind: 'summary' })) + (await count('cold', { kind: 'summary' })),
    superseded:
      (await count('hot', { supersededBy: { $exists: true } })) +
      (await count('cold', { supersededBy: { $exists: true } })),
  };
  expect(held).toEqual({
    erased: 1,
    standIns: held.standIns || 1,
    summaries: held.summaries || 1,
    superseded: 1,
  });
  return agentId;
}

async function* toLines(lines: string[]): AsyncGenerator<string> {
  yield* lines;
}

async function exportToFile(agentId: string, name: string): Promise<string> {
  const file = join(dir, name);
  const run = await runMemgate(env, ['export', '--agent', agentId, '--out', file]);
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  return file;
}

/** An export file's lines, and the first erasure's tombstone among them. */
function exportLines(file: string): { lines: string[]; erasure: { _id: string } } {
  const lines = readFileSync(file, 'utf8').trimEnd().split('\n');
  const erasure = JSON.parse(
    lines.find((l) => (JSON.parse(l) as { reason?: string }).reason === 'erased')!,
  ) as { _id: string };
  return { lines, erasure };
}

async function importFile(agentId: string, file: string, ...flags: string[]) {
  return runMemgate(env, ['import', '--agent', agentId, '--file', file, ...flags]);
}

/** A recall with every id the target holds for it mapped back to the source's. */
function mapped(r: RecallResult, toTarget: (id: string) => string) {
  return {
    hits: r.hits.map((h) => ({
      id: toTarget(h.id),
      score: h.score,
      tier: h.tier,
      text: h.text,
      supersededBy: h.supersededBy && toTarget(h.supersededBy),
    })),
    missing: r.missing?.map((m) => ({
      id: toTarget(m.tombstoneId),
      reason: m.reason,
      standIn: m.standIn && { ...m.standIn, summaryId: toTarget(m.standIn.summaryId) },
    })),
    successors: r.successors?.map((s) => toTarget(s.id)),
  };
}

describe('memgate export and import', () => {
  let file: string;
  let target: string;

  it('round-trips 10,000 entries into a new agent: equal recall, and verify passes', async () => {
    file = await exportToFile(source, 'source.jsonl');
    const lines = readFileSync(file, 'utf8').trimEnd().split('\n');
    expect(JSON.parse(lines[0]!)).toMatchObject({ type: 'header', agentId: source, vectors: false });
    expect(JSON.parse(lines.at(-1)!)).toEqual({ type: 'end', records: lines.length - 2 });

    target = env.agent('export-target');
    const run = await importFile(target, file);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const result = JSON.parse(run.stdout) as ImportResult;
    const stored = async (agentId: string) => ({
      hot: await env.store.hot.countDocuments({ agentId }),
      cold: await env.store.cold.countDocuments({ agentId }),
      tombstones: await env.store.tombstones.countDocuments({ agentId }),
    });
    const held = await stored(source);
    expect(held.hot + held.cold).toBeGreaterThan(BULK);
    expect(result).toMatchObject({ from: source, idsKept: false, skipped: 0, imported: held });
    expect(await stored(target)).toEqual(held);
    await expectVerified(env, target);
    await expectCensusKept(env.store, target);

    const toTarget = (id: string) => importedId(source, target, id);
    let hits = 0;
    for (const query of QUERIES) {
      for (const deep of [false, true]) {
        for (const k of [10, 50]) {
          const request = { query, deep, k, asOf: AS_OF };
          const before = await lexical.recall({ ...request, agentId: source });
          const after = await lexical.recall({ ...request, agentId: target });
          expect(
            mapped(after, (id) => id),
            `${query} (deep: ${deep}, k: ${k})`,
          ).toEqual(mapped(before, toTarget));
          hits += before.hits.length;
        }
      }
    }
    // Every query found something in at least one of its modes.
    expect(hits).toBeGreaterThan(QUERIES.length * 10);

    // Both terms held by ~1,000 entries, over the budget: the rarest proposes, read up to the
    // budget in the store's order (docs/recall.md), so which entries is not promised, and
    // neither are their scores: BM25's statistics are over the entries read (core/bm25.ts),
    // which differ with the order. The queries above, within the budget, compare scores.
    for (const deep of [false, true]) {
      const request = { query: OVER_BUDGET, deep, k: 50, asOf: AS_OF };
      const before = mapped(await lexical.recall({ ...request, agentId: source }), toTarget).hits;
      const after = mapped(await lexical.recall({ ...request, agentId: target }), (id) => id).hits;
      expect(after).toHaveLength(before.length);
      expect(before.length).toBe(50);
      for (const hit of after) expect(hit.text).toMatch(/amber|heron/);
    }
  }, 600_000);

  it('streams the same lines over HTTP as the command writes, behind the API key', async () => {
    const server: RunningServer = await startHttpServer(env.client, env.config, { port: 0 });
    try {
      const { key } = await createKey(env.store, source, Date.now());
      const { key: otherKey } = await createKey(env.store, env.agent('someone-else'), Date.now());
      const url = `${server.url}/v1/agents/${source}/export`;
      const res = await fetch(url, { headers: { authorization: `Bearer ${key}` } });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('application/x-ndjson');
      const served = (await res.text()).trimEnd().split('\n');
      const written = readFileSync(file, 'utf8').trimEnd().split('\n');
      const { exportedAt: _a, ...servedHeader } = JSON.parse(served[0]!) as Record<string, unknown>;
      const { exportedAt: _b, ...writtenHeader } = JSON.parse(written[0]!) as Record<string, unknown>;
      expect(servedHeader).toEqual(writtenHeader);
      expect(served.length).toBe(written.length);
      expect(served.slice(1)).toEqual(written.slice(1));

      const forbidden = await fetch(url, { headers: { authorization: `Bearer ${otherKey}` } });
      expect(forbidden.status).toBe(403);
      expect(await forbidden.json()).toMatchObject({ error: { type: 'Forbidden' } });
      const unkeyed = await fetch(url);
      expect(unkeyed.status).toBe(401);
      const { key: anyKey } = await createKey(env.store, '*', Date.now());
      const nobody = await fetch(`${server.url}/v1/agents/${env.agent('nobody')}/export`, {
        headers: { authorization: `Bearer ${anyKey}` },
      });
      expect(nobody.status).toBe(404);
      expect(await nobody.json()).toMatchObject({ error: { type: 'NotFound' } });
    } finally {
      await server.close();
    }
  }, 300_000);

  it('stops quietly when its reader closes the pipe early, as `| head -1` does', async () => {
    const run = await runMemgateClosingEarly(env, ['export', '--agent', source]);
    expect(run.stdout).toContain('"type":"header"');
    expect(run.stderr).not.toContain('    at ');
    expect(run.stderr).not.toContain('EPIPE');
    expect(run.code).toBe(0);
  }, 120_000);

  it('answers a store failure before the first line as StackUnavailable over HTTP, as every other call does', async () => {
    const server: RunningServer = await startHttpServer(env.client, env.config, { port: 0 });
    // A server error the store's guard passes on as the driver raised it.
    const undo = interleaveOnce(env.client.store, 'entryIds', 'findOne', async () => {
      throw new MongoServerError({ message: 'not authorized on memgate to execute command', code: 13 });
    });
    try {
      const { key } = await createKey(env.store, source, Date.now());
      const res = await fetch(`${server.url}/v1/agents/${source}/export`, {
        headers: { authorization: `Bearer ${key}` },
      });
      expect(res.status).toBe(503);
      expect(await res.json()).toMatchObject({ error: { type: 'StackUnavailable' } });
    } finally {
      undo();
      await server.close();
    }
  });

  it('refuses a malformed line by its number: what came before it is written, nothing of it', async () => {
    const lines = readFileSync(file, 'utf8').trimEnd().split('\n');
    const firstEntry = lines.findIndex((l) => (JSON.parse(l) as { type: string }).type === 'entry');
    const bad = firstEntry + 3;
    const line = JSON.parse(lines[bad]!) as { _id: string; salience: { base: number } };
    line.salience.base = 2;
    const broken = join(dir, 'broken.jsonl');
    writeFileSync(broken, [...lines.slice(0, bad), JSON.stringify(line), ...lines.slice(bad + 1)].join('\n'));
    const agentId = env.agent('export-broken');
    const run = await importFile(agentId, broken);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(`error [InvalidInput]: invalid export: line ${bad + 1} refused`);
    expect(run.stderr).toContain('salience.base');

    const id = (n: number) => importedId(source, agentId, (JSON.parse(lines[n]!) as { _id: string })._id);
    const where = async (entry: string) => ({
      hot: (await env.store.hot.countDocuments({ _id: entry })) > 0,
      cold: (await env.store.cold.countDocuments({ _id: entry })) > 0,
      registered: (await env.store.entryIds.countDocuments({ _id: entry })) > 0,
    });
    expect(await where(id(bad))).toEqual({ hot: false, cold: false, registered: false });
    expect(await where(id(bad - 1))).toMatchObject({ registered: true });
    expect(await where(id(bad + 1))).toEqual({ hot: false, cold: false, registered: false });

    const notJson = join(dir, 'not-json.jsonl');
    writeFileSync(notJson, [lines[0], '{"type": "tombstone",', lines.at(-1)].join('\n'));
    const second = await importFile(env.agent('export-not-json'), notJson);
    expect(second.code).toBe(2);
    expect(second.stderr).toContain('invalid export: line 2 refused (not JSON');

    const erasure = lines.find((l) => (JSON.parse(l) as { reason?: string }).reason === 'erased')!;
    const withContent = join(dir, 'erasure-with-content.jsonl');
    writeFileSync(
      withContent,
      [lines[0], JSON.stringify({ ...JSON.parse(erasure), terms: ['door'] })].join('\n'),
    );
    const third = await importFile(env.agent('export-erasure-content'), withContent);
    expect(third.code).toBe(2);
    expect(third.stderr).toContain('line 2 refused (an erasure tombstone holds no terms and no atoms)');

    // The order of the lines, in process: each refusal names its line.
    const entryText = lines[firstEntry]!;
    const cases: [string, string[], string][] = [
      [
        'a tombstone after an entry',
        [lines[0]!, entryText, erasure],
        'line 3 refused (a tombstone after an entry',
      ],
      ['a second header', [lines[0]!, lines[0]!], 'line 2 refused (a second header)'],
      ['no header', [entryText], 'line 1 refused (the first line must be the header)'],
      [
        'a wrong count',
        [lines[0]!, entryText, '{"type":"end","records":2}'],
        'line 3 refused (the end line counts 2',
      ],
      ['a cut-off export', [lines[0]!, entryText], 'line 3 refused (the export ends without its end line'],
      [
        'a line after the end',
        [lines[0]!, '{"type":"end","records":0}', entryText],
        'line 3 refused (a line after',
      ],
    ];
    for (const [what, input, refusal] of cases) {
      const into = importExport(env.store, env.agent('export-order'), toLines(input), Date.now());
      await expect(into, what).rejects.toThrow(refusal);
    }
  }, 300_000);

  it('never brings an erased id back: an entry behind an imported or a held erasure is not written', async () => {
    const { lines, erasure } = exportLines(file);
    const someEntry = JSON.parse(
      lines.find((l) => (JSON.parse(l) as { type: string }).type === 'entry')!,
    ) as object;
    // What an export taken while the erasure ran, or before it, holds: the erased entry itself.
    const erased = JSON.stringify({ ...someEntry, _id: erasure._id, text: 'The lab door code is 4471.' });
    const stored = async (agentId: string) => {
      const id = importedId(source, agentId, erasure._id);
      return {
        hot: await env.store.hot.countDocuments({ _id: id }),
        cold: await env.store.cold.countDocuments({ _id: id }),
        tombstone: (await env.store.tombstones.findOne({ _id: id }))?.reason,
      };
    };

    const raced = join(dir, 'raced.jsonl');
    writeFileSync(
      raced,
      [lines[0], JSON.stringify(erasure), erased, '{"type":"end","records":2}'].join('\n'),
    );
    const fresh = env.agent('export-raced');
    const run = await importFile(fresh, raced);
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({
      imported: { tombstones: 1, hot: 0, cold: 0 },
      skipped: 1,
    });
    expect(await stored(fresh)).toEqual({ hot: 0, cold: 0, tombstone: 'erased' });
    await expectVerified(env, fresh);

    const older = join(dir, 'older.jsonl');
    writeFileSync(older, [lines[0], erased, '{"type":"end","records":1}'].join('\n'));
    const again = await importFile(target, older, '--into-existing');
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({
      imported: { tombstones: 0, hot: 0, cold: 0 },
      skipped: 1,
    });
    expect(await stored(target)).toEqual({ hot: 0, cold: 0, tombstone: 'erased' });
  }, 300_000);

  it('lists an erasure it brings for an id the agent holds behind an eviction tombstone: only forget erases what that tombstone and its stand-in derived', async () => {
    const lines = readFileSync(file, 'utf8').trimEnd().split('\n');
    const records = lines.map((l) => JSON.parse(l) as { type: string; _id?: string; reason?: string });
    const erasure = records.find((r) => r.reason === 'erased')!;
    const evicted = records.find(
      (r) => r.type === 'tombstone' && r.reason !== undefined && r.reason !== 'erased',
    )!;
    // The same agent, erased elsewhere since: its erasure of the entry the agent here evicted.
    const erasedElsewhere = join(dir, 'erased-elsewhere.jsonl');
    writeFileSync(
      erasedElsewhere,
      [lines[0], JSON.stringify({ ...erasure, _id: evicted._id }), '{"type":"end","records":1}'].join('\n'),
    );
    const run = await importFile(source, erasedElsewhere, '--into-existing');
    expect(run.code).toBe(0);
    expect((JSON.parse(run.stdout) as ImportResult).erasuresNotApplied).toEqual([evicted._id]);
  }, 300_000);

  it("names in an erased summary's tombstone reason the id its erased source has in the agent imported into", async () => {
    const { lines, erasure } = exportLines(file);
    const summary = { ...erasure, _id: `${erasure._id}-summary`, reason: derivedFromErased(erasure._id) };
    const withSummary = join(dir, 'erased-summary.jsonl');
    writeFileSync(withSummary, [lines[0], JSON.stringify(summary), '{"type":"end","records":1}'].join('\n'));
    const into = env.agent('export-erased-summary');
    expect((await importFile(into, withSummary)).code).toBe(0);
    const stone = await env.store.tombstones.findOne({ _id: importedId(source, into, summary._id) });
    expect(stone?.reason).toBe(derivedFromErased(importedId(source, into, erasure._id)));
  }, 300_000);

  it('imports into an agent that holds entries only with --into-existing, keeping what it holds', async () => {
    const refused = await importFile(target, file);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('--into-existing');
    const before = await env.store.hot.countDocuments({ agentId: target });

    const again = await importFile(target, file, '--into-existing');
    expect(again.stderr).toBe('');
    expect(again.code).toBe(0);
    const result = JSON.parse(again.stdout) as ImportResult;
    expect(result.imported).toEqual({ tombstones: 0, hot: 0, cold: 0 });
    expect(result.skipped).toBe(result.lines - 2);
    expect(result.erasuresNotApplied).toEqual([]);
    expect(await env.store.hot.countDocuments({ agentId: target })).toBe(before);
    await expectVerified(env, target);
  }, 300_000);

  it('counts into hot a summary the last night wrote, which awaits its terms', async () => {
    const agentId = env.agent('export-summary-source');
    await env.client.write({
      agentId,
      entries: [
        'Courier pickups leave from dock 7 at 16:00.',
        'Courier pickups leave from dock 7 at 16:00!',
      ].map((text, i) => ({ text, salience: 0.2, writtenAt: dayAt(0, 9 + i) })),
    });
    await env.client.consolidate({ agentId, asOf: dayAt(1, 3) });
    const summaries = await env.store.hot.find({ agentId, kind: 'summary' }).toArray();
    expect(summaries.some((s) => s.pending?.includes('terms'))).toBe(true);

    const into = env.agent('export-summary-target');
    expect((await importFile(into, await exportToFile(agentId, 'summary.jsonl'))).code).toBe(0);
    expect((await tierCounts(env.store, into)).hot).toBe((await tierCounts(env.store, agentId)).hot);
  }, 300_000);

  it('imports one copy of an entry the export caught mid-move, counted once', async () => {
    const agentId = env.agent('export-mid-move');
    await env.client.write({
      agentId,
      entries: ['Dock 7 closes at noon on Fridays.', 'The lab door code changes monthly.'].map((text, i) => ({
        text,
        salience: 0.9,
        writtenAt: dayAt(0, 9 + i),
      })),
    });
    await env.client.consolidate({ agentId, asOf: dayAt(1, 3) });
    // A spill stopped between its copy to cold and its delete from hot.
    const moving = (await env.store.hot.findOne({ agentId }))!;
    failOnce(env.store, 'hot', 'deleteMany');
    const night = { agentId, asOf: dayAt(2, 3), runId: `${agentId}@stopped` };
    await expect(
      spillEntries(env.store, night, [{ step: spillStep(moving._id), entry: moving }]),
    ).rejects.toThrow(/injected/);
    expect(await env.store.cold.countDocuments({ _id: moving._id })).toBe(1);

    const into = env.agent('export-mid-move-target');
    const run = await importFile(into, await exportToFile(agentId, 'mid-move.jsonl'));
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ imported: { hot: 2, cold: 0 }, skipped: 1 });
    const id = importedId(agentId, into, moving._id);
    expect(await env.store.hot.countDocuments({ _id: id })).toBe(1);
    expect(await env.store.cold.countDocuments({ _id: id })).toBe(0);
    expect((await tierCounts(env.store, into)).cold).toBe(0);
    await expectVerified(env, into);
    await expectCensusKept(env.store, into);
  }, 300_000);

  it('imports no second copy of an entry the agent moved to the other tier since the export', async () => {
    // A night between an interrupted import and its rerun (or an older export) moved one.
    const moved = (await env.store.hot.findOne({ agentId: target, kind: 'episode' }))!;
    const night = { agentId: target, asOf: AS_OF, runId: `${target}@moved` };
    expect(await spillEntries(env.store, night, [{ step: spillStep(moved._id), entry: moved }])).toBe(1);

    const again = await importFile(target, file, '--into-existing');
    expect(again.code).toBe(0);
    expect((JSON.parse(again.stdout) as ImportResult).imported).toEqual({ tombstones: 0, hot: 0, cold: 0 });
    expect(await env.store.hot.countDocuments({ _id: moved._id })).toBe(0);
    expect(await env.store.cold.countDocuments({ _id: moved._id })).toBe(1);
    await expectVerified(env, target);
  }, 300_000);
});
