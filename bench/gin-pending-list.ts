/**
 * The local stack's GIN twins with and without a pending list (stack/postgres.ts): two
 * collections with the tiers' indexes, each loaded with BENCH_GIN_ENTRIES entries and vacuumed,
 * one whose twins are set back to PostgreSQL's default (`fastupdate = on`). Then, by turns,
 * what the store does on them all day: writes of 16 entries, reads of an entry by id and of a
 * term's postings, and version-guarded updates 16 to a command (the night's refreshes). Runs
 * on the local stack only; prints JSON.
 */
import type { Collection } from 'mongodb';
import { memoryPolicy, type Entry } from '../core/entry';
import { terms } from '../core/text';
import { INDEXES } from '../store/db';
import { indexedEntry, termKeys } from '../store/entries';
import { findById } from '../store/tiers';
import { adminClient, ginTwinsOf } from '../stack/postgres';
import { postgresPaths } from '../stack/stack';
import {
  emit,
  episodeEntry,
  percentile,
  round,
  startBenchEnv,
  vacuumLoadedStore,
  writePathText,
  type BenchEnv,
} from './support';

const ENTRIES = Number(process.env.BENCH_GIN_ENTRIES ?? 50_000);
const WRITE_BATCHES = 1_000;
const BATCH = 16;
const READS = 500;
const UPDATES = 800;
const ROUNDS = 2;
const AGENT = 'bench-gin';

type PendingList = 'on' | 'off';

async function setPendingList(env: BenchEnv, collection: string, pendingList: PendingList): Promise<void> {
  const pg = await adminClient(postgresPaths(env.config), env.config.postgresPort);
  try {
    const twins = await ginTwinsOf(pg, env.config.database, collection);
    if (twins.length === 0) throw new Error(`no GIN twins on ${collection}: is this the local stack?`);
    for (const { name } of twins)
      await pg.query(`ALTER INDEX "${env.config.database}"."${name}" SET (fastupdate = ${pendingList})`);
  } finally {
    await pg.end();
  }
}

function sorted(ms: number[]): number[] {
  return [...ms].sort((a, b) => a - b);
}

async function main(): Promise<void> {
  const env = await startBenchEnv();
  try {
    const policy = memoryPolicy(env.config);
    let written = 0;
    const entry = (i: number): Entry =>
      indexedEntry(
        episodeEntry(
          AGENT,
          String(i),
          { text: writePathText(i % 16, i), writtenAt: Date.now() - i * 1_000, salience: 0.6 },
          policy,
        ),
      );
    const collections = new Map<PendingList, Collection<Entry>>();
    const ids = new Map<PendingList, string[]>();
    for (const pendingList of ['on', 'off'] as const) {
      const name = `gin_pending_${pendingList}`;
      const collection = env.client.store.db.collection<Entry>(name);
      for (const keys of INDEXES.hot) await collection.createIndex(keys);
      await setPendingList(env, name, pendingList);
      const loaded: string[] = [];
      for (let i = 0; i < ENTRIES; i += 5_000) {
        const docs = Array.from({ length: Math.min(5_000, ENTRIES - i) }, () => entry(written++));
        await collection.insertMany(docs);
        loaded.push(...docs.map((d) => d._id));
      }
      collections.set(pendingList, collection);
      ids.set(pendingList, loaded);
    }
    await vacuumLoadedStore(env);
    // Terms of at most 1 % of the entries (numbers, mostly), as a query's rarer terms are: a
    // read of a term every entry holds measures the reading of rows, not the index.
    const sample = 3_000;
    const df = new Map<string, number>();
    for (let i = 0; i < sample; i++)
      for (const t of new Set(terms(writePathText(i % 16, i)))) df.set(t, (df.get(t) ?? 0) + 1);
    const vocabulary = [...df].filter(([, n]) => n <= sample / 100).map(([t]) => t);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(Math.random() * xs.length)]!;

    const runs = [];
    for (let r = 0; r < ROUNDS; r++) {
      for (const pendingList of ['on', 'off'] as const) {
        const collection = collections.get(pendingList)!;
        const known = ids.get(pendingList)!;
        const writeMs: number[] = [];
        for (let b = 0; b < WRITE_BATCHES; b++) {
          const docs = Array.from({ length: BATCH }, () => entry(written++));
          const started = performance.now();
          await collection.insertMany(docs);
          writeMs.push(performance.now() - started);
          known.push(...docs.map((d) => d._id));
        }
        const byIdMs: number[] = [];
        for (let i = 0; i < READS; i++) {
          const id = pick(known);
          const started = performance.now();
          if (!(await findById(collection, AGENT, id))) throw new Error(`${id} not found`);
          byIdMs.push(performance.now() - started);
        }
        const termMs: number[] = [];
        for (let i = 0; i < READS; i++) {
          const [key] = termKeys(AGENT, [pick(vocabulary)]);
          const started = performance.now();
          await collection.find({ termKeys: key }, { projection: { _id: 1 } }).toArray();
          termMs.push(performance.now() - started);
        }
        const updating = performance.now();
        for (let i = 0; i < UPDATES; i += BATCH) {
          await collection.bulkWrite(
            Array.from({ length: BATCH }, () => ({
              updateOne: {
                filter: { _id: pick(known), agentId: AGENT },
                update: { $set: { refreshedAt: Date.now() }, $inc: { version: 1 } },
              },
            })),
            { ordered: false },
          );
        }
        const updateMsPerEntry = (performance.now() - updating) / UPDATES;
        const writes = sorted(writeMs);
        const byId = sorted(byIdMs);
        const term = sorted(termMs);
        runs.push({
          pendingList,
          round: r + 1,
          writeOf16P50Ms: round(percentile(writes, 50), 1),
          writeOf16P99Ms: round(percentile(writes, 99), 1),
          writeOf16MaxMs: round(writes.at(-1)!, 1),
          readByIdP50Ms: round(percentile(byId, 50), 2),
          readByIdP99Ms: round(percentile(byId, 99), 2),
          termReadP50Ms: round(percentile(term, 50), 1),
          termReadP99Ms: round(percentile(term, 99), 1),
          updateMsPerEntry: round(updateMsPerEntry, 2),
        });
      }
    }
    emit({
      benchmark: 'gin-pending-list',
      entries: ENTRIES,
      writesOf16: WRITE_BATCHES,
      reads: READS,
      updates: UPDATES,
      runs,
    });
  } finally {
    await env.close();
  }
}

void main();
