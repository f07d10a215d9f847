import { describe, expect, it } from 'vitest';
import { ConflictError } from '../../core/errors';
import { DAY_MS, HOUR_MS } from '../../core/salience';
import { useTestEnv } from '../support/env';
import { expectVerified } from '../support/verify';

/**
 * A summary stands for current facts only (docs/invariants.md, Current summaries): a fact
 * superseded the same night is not merged with the fact that supersedes it into one summary
 * that keeps the old value in default recall (the night supersedes before it consolidates),
 * and a summary written on an earlier night is retired when a later fact supersedes one of
 * its sources, its current sources summarised anew.
 */
const T0 = Date.UTC(2025, 9, 1);
const dayAt = (day: number, hour: number) => T0 + day * DAY_MS + hour * HOUR_MS;

const env = useTestEnv();

describe('summaries of superseded facts', () => {
  it('two values of one attribute written the same day: default recall answers only the newer', async () => {
    const agentId = env.agent('same-night-supersession');
    const fact = (days: number, hour: number) => ({
      text: `The supplier's contractual notice period is ${days} days.`,
      kind: 'fact' as const,
      salience: 0.9,
      subject: 'supplier',
      attribute: 'notice period',
      writtenAt: dayAt(0, hour),
    });
    const { entries } = await env.client.write({ agentId, entries: [fact(14, 9), fact(30, 10)] });
    const [older, newer] = entries.map((e) => e.id) as [string, string];
    const report = await env.client.consolidate({ agentId, asOf: dayAt(1, 3) });
    expect(report.counts.superseded).toBe(1);
    expect(await env.store.hot.findOne({ _id: older })).toMatchObject({
      isActive: false,
      supersededBy: newer,
    });

    const { hits } = await env.client.recall({
      agentId,
      query: "What is the supplier's notice period?",
      asOf: dayAt(1, 9),
    });
    expect(hits.map((h) => h.id)).toContain(newer);
    for (const hit of hits) expect(hit.text, hit.id).not.toContain('14 days');
    expect(await env.store.hot.countDocuments({ agentId, kind: 'summary', derivedFrom: older })).toBe(0);
    await expectVerified(env, agentId);
  }, 300_000);

  it('a summary from an earlier night is retired when a later fact supersedes one of its sources; restore brings nothing stale back', async () => {
    const agentId = env.agent('later-supersession');
    const retention = (days: number, day: number) => ({
      text: `Backups are ${day > 0 ? 'now ' : ''}kept for ${days} days in the Frankfurt region.`,
      kind: 'fact' as const,
      salience: 0.9,
      subject: 'backups',
      attribute: 'retention',
      writtenAt: dayAt(day, 9),
    });
    const { entries } = await env.client.write({
      agentId,
      entries: [
        retention(14, 0),
        { text: 'Backups are kept in the Frankfurt region.', salience: 0.9, writtenAt: dayAt(0, 10) },
        {
          text: 'Backups are kept in the Frankfurt region, encrypted with AES.',
          salience: 0.9,
          writtenAt: dayAt(0, 11),
        },
      ],
    });
    const [days14, region, encrypted] = entries.map((e) => e.id) as [string, string, string];
    await env.client.consolidate({ agentId, asOf: dayAt(1, 3) });
    const earlier = (await env.store.hot.findOne({ agentId, kind: 'summary' }))!;
    expect(earlier).toMatchObject({ derivedFrom: [days14, region, encrypted], isActive: true });
    expect(earlier.text).toContain('14 days');

    const [days30] = (await env.client.write({ agentId, entries: [retention(30, 4)] })).entries.map(
      (e) => e.id,
    );
    const night = await env.client.consolidate({ agentId, asOf: dayAt(5, 3) });
    expect(night.counts.superseded).toBe(1);

    const query = { agentId, query: 'How long are backups kept in the Frankfurt region?' };
    const { hits } = await env.client.recall({ ...query, asOf: dayAt(5, 9) });
    expect(hits.some((h) => h.text.includes('30 days'))).toBe(true);
    for (const hit of hits) expect(hit.text, hit.id).not.toContain('14 days');

    // Retired, not deleted: deep recall still finds it; no source claims it as a stand-in.
    expect(await env.store.hot.findOne({ _id: earlier._id })).toMatchObject({
      isActive: false,
      text: earlier.text,
    });
    for (const id of [days14, region, encrypted]) {
      const source = (await env.store.hot.findOne({ _id: id }))!;
      expect(source.subsumedBy?.map((l) => l.summaryId) ?? [], id).not.toContain(earlier._id);
    }
    expect(await env.store.ledger.findOne({ agentId, event: 'retire', entryId: earlier._id })).toMatchObject({
      inputs: { sourceId: days14, supersededBy: days30 },
    });
    const deep = await env.client.recall({ ...query, deep: true, asOf: dayAt(5, 9) });
    expect(deep.hits.find((h) => h.id === earlier._id)).toMatchObject({ isActive: false });
    // Its current sources were summarised again the same night, with the new value.
    const current = (await env.store.hot.findOne({ agentId, kind: 'summary', isActive: true }))!;
    expect(current.derivedFrom).toEqual([region, encrypted, days30]);
    expect(current.text).toContain('30 days');
    expect(current.text).not.toContain('14 days');
    await expectVerified(env, agentId);
    // Left active, it would be what `memgate verify` names.
    await env.store.hot.updateOne({ _id: earlier._id }, { $set: { isActive: true } });
    expect((await env.client.verify({ agentId })).findings).toEqual([
      expect.objectContaining({ check: 'summary-not-current', id: earlier._id }),
    ]);
    await env.store.hot.updateOne({ _id: earlier._id }, { $set: { isActive: false } });

    // The retired summary cannot come back while it holds the superseded fact; the fact can,
    // and then awaits clustering like a new write.
    await expect(env.client.restore({ agentId, entryId: earlier._id })).rejects.toBeInstanceOf(ConflictError);
    await env.client.restore({ agentId, entryId: days14 });
    expect(await env.store.hot.findOne({ _id: days14 })).toMatchObject({
      isActive: true,
      pending: expect.arrayContaining(['cluster']),
    });
    await env.client.consolidate({ agentId, asOf: dayAt(6, 3) });
    expect(await env.store.hot.findOne({ _id: earlier._id })).toMatchObject({ isActive: false });
    await expectVerified(env, agentId);
  }, 300_000);
});
