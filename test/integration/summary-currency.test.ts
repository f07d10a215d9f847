import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assessSummary, buildSummaryEntry } from '../../core/nightly/clusters';
import { memoryPolicy, type Entry } from '../../core/entry';
import { DAY_MS, HOUR_MS } from '../../core/salience';
import { extractiveSummary } from '../../llm/summariser';
import { indexedEntry } from '../../store/entries';
import { listedSources, startChatModel, type ChatModel } from '../support/chatModel';
import { startTestEnv, type TestEnv } from '../support/env';
import { failOnce, interleaveOnce } from '../support/faults';
import { expectVerified } from '../support/verify';

/**
 * A summary stands only for what is current, and what it claims is what it holds
 * (docs/invariants.md, Current summaries; Lossy unless proven): a volatile fact is never
 * merged with durable ones; a retried consolidation links the sources to the text stored
 * first, whatever the model answers the second time; an erasure that rebuilds a summary
 * leaves no source claiming a lossless stand-in that lacks its facts, wherever it crashes.
 *
 * The summariser is a model behind a local chat-completions endpoint that merges its sources
 * as the local extractive summariser does, through a rewrite a test may set: the way to get a
 * model that answers otherwise on another attempt.
 */
const T0 = Date.UTC(2025, 10, 1);
const dayAt = (day: number, hour: number) => T0 + day * DAY_MS + hour * HOUR_MS;

let model: ChatModel;
let env: TestEnv;
let rewrite: (summary: string) => string = (summary) => summary;

beforeAll(async () => {
  model = await startChatModel(({ lastMessage }) => rewrite(extractiveSummary(listedSources(lastMessage))));
  env = await startTestEnv({ OPENAI_BASE_URL: model.url, OPENAI_API_KEY: 'test-key' });
}, 300_000);

afterAll(async () => {
  await env?.close();
  await model?.close();
});

async function stored(id: string): Promise<Entry> {
  const entry = (await env.store.hot.findOne({ _id: id })) ?? (await env.store.cold.findOne({ _id: id }));
  expect(entry, id).not.toBeNull();
  return entry!;
}

/** Three near-duplicates: the desk (the oldest, so it seeds the cluster), bay 12, a door code. */
async function writeReceptionNotes(agentId: string) {
  const { entries } = await env.client.write({
    agentId,
    entries: [
      { text: 'Visitors sign in at the north reception desk.', salience: 0.9, writtenAt: dayAt(0, 9) },
      {
        text: 'Visitors sign in at the north reception desk, bay 12.',
        salience: 0.9,
        writtenAt: dayAt(0, 10),
      },
      {
        text: 'Visitors sign in at the north reception desk. The lab door code is 4471.',
        salience: 0.9,
        writtenAt: dayAt(0, 11),
      },
    ],
  });
  const [desk, bay, code] = entries.map((e) => e.id) as [string, string, string];
  return { desk, bay, code };
}

/** What the model's text drops: the line holding bay 12. */
const dropBay = (summary: string) =>
  summary
    .split('\n')
    .filter((line) => !line.includes('bay 12'))
    .join('\n');

describe('a summary merges durable entries only', () => {
  it('keeps a volatile fact out of a summary of durable ones, which stays in default recall after the fact lapses', async () => {
    const agentId = env.agent('volatile-apart');
    const { entries } = await env.client.write({
      agentId,
      entries: [
        { text: 'The loading dock closes at 18:00 on weekdays.', salience: 0.9, writtenAt: dayAt(0, 9) },
        {
          text: 'The loading dock closes at 18:00 on weekdays, gate B.',
          salience: 0.9,
          writtenAt: dayAt(0, 10),
        },
        {
          text: 'The loading dock closes at 18:00 on weekdays. Today it closes at 16:00.',
          kind: 'fact',
          volatile: true,
          freshUntil: dayAt(2, 0),
          salience: 0.9,
          writtenAt: dayAt(0, 11),
        },
      ],
    });
    const [weekdays, gate, today] = entries.map((e) => e.id) as [string, string, string];
    await env.client.consolidate({ agentId, asOf: dayAt(1, 3) });
    const summary = (await env.store.hot.findOne({ agentId, kind: 'summary' }))!;
    expect(summary).toMatchObject({ derivedFrom: [weekdays, gate], validity: { volatile: false } });
    expect(summary.validity.freshUntil).toBeUndefined();
    expect((await stored(today)).subsumedBy).toBeUndefined();

    const lapsed = await env.client.consolidate({ agentId, asOf: dayAt(3, 3) });
    expect(lapsed.counts.expired).toBe(1);
    const { hits } = await env.client.recall({
      agentId,
      query: 'When does the loading dock close?',
      asOf: dayAt(3, 10),
    });
    expect(hits.map((h) => h.id)).toContain(summary._id);
    for (const hit of hits) expect(hit.text, hit.id).not.toContain('16:00');
    await expectVerified(env, agentId);
  }, 300_000);
});

describe('what a summary claims is what it holds', () => {
  it('a retried consolidation whose model answers otherwise links each source by the text stored first', async () => {
    const agentId = env.agent('retried-summary');
    const { desk, bay, code } = await writeReceptionNotes(agentId);
    const policy = memoryPolicy(env.config);
    let earlierText = '';
    // An earlier attempt stored its summary, whose model dropped bay 12, and died before it
    // recorded it; this attempt's model keeps everything, and its insert finds the earlier one.
    const undo = interleaveOnce(
      env.worker.store,
      'hot',
      'insertMany',
      async (args) => {
        const [summary] = args[0] as Entry[];
        const sources = await Promise.all(summary!.derivedFrom!.map(stored));
        sources.sort((a, b) => a.writtenAt - b.writtenAt);
        const texts = sources.map((s) => ({ id: s._id, text: s.text }));
        earlierText = dropBay(extractiveSummary(texts));
        const earlier = buildSummaryEntry(
          summary!._id,
          sources,
          earlierText,
          assessSummary(texts, earlierText),
          {
            asOf: summary!.writtenAt,
            runId: summary!.source.ref!,
            policy,
          },
        );
        await env.store.hot.insertOne(indexedEntry(earlier));
      },
      (args) => (args[0] as Entry[])[0]?.kind === 'summary',
    );
    try {
      await env.client.consolidate({ agentId, asOf: dayAt(1, 3) });
    } finally {
      undo();
    }
    expect(earlierText).not.toBe('');
    const summary = (await env.store.hot.findOne({ agentId, kind: 'summary' }))!;
    expect(summary).toMatchObject({ text: earlierText, lossy_summary: true, derivedFrom: [desk, bay, code] });
    expect((await stored(bay)).subsumedBy).toEqual([{ summaryId: summary._id, lossless: false }]);
    for (const id of [desk, code]) {
      expect((await stored(id)).subsumedBy).toEqual([{ summaryId: summary._id, lossless: true }]);
    }
    const record = await env.store.ledger.findOne({ agentId, event: 'summarise', entryId: summary._id });
    expect(record?.inputs).toMatchObject({ lossy_summary: true });
    await expectVerified(env, agentId);
  }, 300_000);

  it('an erasure that rebuilds a summary, crashed at any write and retried, never leaves a lossless claim on text lacking the facts', async () => {
    let crashed = true;
    let crashPoints = 0;
    for (let crashAt = 1; crashed; crashAt++) {
      const agentId = env.agent(`rebuild-crash-${crashAt}`);
      const { desk, bay, code } = await writeReceptionNotes(agentId);
      rewrite = (summary) => summary;
      await env.client.consolidate({ agentId, asOf: dayAt(1, 3) });
      const summaryId = (await env.store.hot.findOne({ agentId, kind: 'summary' }))!._id;
      expect((await stored(bay)).subsumedBy).toEqual([{ summaryId, lossless: true }]);

      /** Each remaining source that claims a lossless stand-in, and what of it the stand-in lacks. */
      const falseClaims = async () => {
        const summary = await stored(summaryId);
        const lacking: string[] = [];
        for (const id of [desk, bay]) {
          const source = await stored(id);
          const lossless = source.subsumedBy?.find((l) => l.summaryId === summaryId)?.lossless;
          const lost = source.atoms.filter((a) => !summary.atoms.includes(a));
          if (lossless && lost.length > 0) lacking.push(`${id} lacks ${lost.join(', ')}`);
        }
        return lacking;
      };
      const atCrash: string[][] = [];
      let writes = 0;
      crashed = false;
      // The model rebuilding the summary drops bay 12: the rebuilt text is lossy for `bay`.
      rewrite = dropBay;
      const undo = failOnce(
        env.worker.store,
        'hot',
        'updateOne',
        async () => {
          crashed = true;
          atCrash.push(await falseClaims());
        },
        () => ++writes === crashAt,
      );
      try {
        await env.client.forget({ agentId, entryId: code });
      } finally {
        undo();
        rewrite = (summary) => summary;
      }
      if (crashed) crashPoints++;
      expect({ crashAt, atCrash }).toEqual({ crashAt, atCrash: crashed ? [[]] : [] });
      const rebuilt = await stored(summaryId);
      expect(rebuilt).toMatchObject({ derivedFrom: [desk, bay], lossy_summary: true });
      expect(rebuilt.text).not.toMatch(/4471|bay 12/);
      expect(await falseClaims()).toEqual([]);
      expect((await stored(bay)).subsumedBy).toEqual([{ summaryId, lossless: false }]);
      expect((await stored(desk)).subsumedBy).toEqual([{ summaryId, lossless: true }]);
      await expectVerified(env, agentId);
    }
    // Withdraw, rewrite, claim, and the erased id leaves: a crash was tried before each write.
    expect(crashPoints).toBeGreaterThanOrEqual(4);
  }, 900_000);
});
