import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ModelError } from '../../core/errors';
import { DAY_MS, HOUR_MS } from '../../core/salience';
import { extractiveSummary } from '../../llm/summariser';
import { listedSources, startChatModel, type ChatModel } from '../support/chatModel';
import { startTestEnv, type TestEnv } from '../support/env';
import { expectVerified } from '../support/verify';

/**
 * What an erasure leaves behind when a model writes the summaries (docs/invariants.md, Erasure
 * wins): the ledger, which outlives it by a year, names a lossy summary's sources but never the
 * facts it lost; and a summariser that keeps refusing fails the erasure without leaving the
 * erased entry readable anywhere.
 *
 * The summariser is a model behind a local chat-completions endpoint that merges its sources
 * as the extractive summariser does, through a rewrite a test may set, or refuses (HTTP 400).
 */
const T0 = Math.floor(Date.now() / DAY_MS - 10) * DAY_MS;
const dayAt = (day: number, hour: number) => T0 + day * DAY_MS + hour * HOUR_MS;

let model: ChatModel;
let env: TestEnv;
let rewrite: (summary: string) => string = (summary) => summary;
let refuse = false;

beforeAll(async () => {
  model = await startChatModel(({ lastMessage }) =>
    refuse ? { refuse: 'not now' } : rewrite(extractiveSummary(listedSources(lastMessage))),
  );
  env = await startTestEnv({ OPENAI_BASE_URL: model.url, OPENAI_API_KEY: 'test-key' });
}, 300_000);

afterAll(async () => {
  await env?.close();
  await model?.close();
});

/** Everything the agent has stored anywhere (document frequencies too), as one string. */
async function everything(agentId: string): Promise<string> {
  const s = env.store;
  return JSON.stringify(
    await Promise.all(
      [s.hot, s.cold, s.tombstones, s.queries, s.ledger, s.runs, s.termStats].map((c) =>
        (c as typeof s.hot).find({ agentId }).toArray(),
      ),
    ),
  );
}

/** Three near-duplicates, the last two with a fact of their own. */
async function receptionNotes(agentId: string) {
  const { entries } = await env.client.write({
    agentId,
    entries: [
      'Visitors sign in at the north reception desk.',
      'Visitors sign in at the north reception desk. Ask Priya Raman for a badge.',
      'Visitors sign in at the north reception desk. The lab door code is 4471.',
    ].map((text, i) => ({ text, salience: 0.9, writtenAt: dayAt(0, 9 + i) })),
  });
  return entries.map((e) => e.id) as [string, string, string];
}

describe('the ledger of a lossy summary', () => {
  it('names the sources whose facts the summary lost, never the facts, before and after they are erased', async () => {
    const agentId = env.agent('ledger-lossy');
    const [, priya] = await receptionNotes(agentId);
    rewrite = (summary) =>
      summary
        .split('\n')
        .filter((line) => !line.includes('Priya'))
        .join('\n');
    try {
      await env.client.consolidate({ agentId, asOf: dayAt(1, 3) });
    } finally {
      rewrite = (summary) => summary;
    }
    const summary = (await env.store.hot.findOne({ agentId, kind: 'summary' }))!;
    expect(summary.lossy_summary).toBe(true);
    const ledger = async () => JSON.stringify(await env.store.ledger.find({ agentId }).toArray());
    expect(await ledger()).not.toMatch(/priya|raman/i);
    const record = await env.store.ledger.findOne({ agentId, event: 'summarise', entryId: summary._id });
    expect(record?.inputs).toMatchObject({ lossy_summary: true, lossySources: [priya] });

    await env.client.forget({ agentId, entryId: priya });
    expect(await ledger()).not.toMatch(/priya|raman/i);
    expect(await everything(agentId)).not.toMatch(/priya|raman/i);
    await expectVerified(env, agentId);
  }, 300_000);
});

describe('forget while the summariser refuses', () => {
  it('fails, with the erased entry readable nowhere; forget again once it answers finishes the summary', async () => {
    const agentId = env.agent('summariser-down');
    const [desk, priya, code] = await receptionNotes(agentId);
    await env.client.consolidate({ agentId, asOf: dayAt(1, 3) });
    const summaryId = (await env.store.hot.findOne({ agentId, kind: 'summary' }))!._id;
    await env.client.recall({ agentId, query: 'lab door code', asOf: dayAt(1, 9) });

    refuse = true;
    try {
      await expect(env.client.forget({ agentId, entryId: code })).rejects.toBeInstanceOf(ModelError);
    } finally {
      refuse = false;
    }
    expect(await everything(agentId)).not.toMatch(/4471|lab door/);
    for (const deep of [false, true]) {
      // Not the erased words themselves: the query log keeps what is asked.
      const { hits } = await env.client.recall({ agentId, query: 'door code', deep, asOf: dayAt(1, 10) });
      expect(hits.map((h) => h.id)).not.toContain(code);
      for (const hit of hits) expect(hit.text).not.toMatch(/4471|lab door/);
    }

    const again = await env.client.forget({ agentId, entryId: code });
    expect(again).toMatchObject({ resummarised: [summaryId], removed: [], tiers: [] });
    expect(await env.store.hot.findOne({ _id: summaryId })).toMatchObject({
      derivedFrom: [desk, priya],
      lossy_summary: false,
    });
    expect(await everything(agentId)).not.toMatch(/4471|lab door/);
    await expectVerified(env, agentId);
  }, 300_000);
});
