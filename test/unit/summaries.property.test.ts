import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SimStore, simPolicy } from '../../sim/model';
import {
  assessSummary,
  buildSummaryEntry,
  claimPatch,
  clusterable,
  releasePatch,
  retirePatch,
} from '../../core/nightly/clusters';
import { parseConfig } from '../../core/config';
import { buildEntry, memoryPolicy, type Entry, type PendingWork } from '../../core/entry';
import { applyPatch, type SupersessionStep } from '../../core/nightly/plans';
import { supersededTonight } from '../../core/nightly/phases';
import { DAY_MS, HOUR_MS } from '../../core/salience';

/**
 * Summaries stay current (docs/invariants.md, Current summaries): a summary merges durable
 * entries only, an active summary is built from no superseded entry, and no entry links a
 * summary that was retired.
 */

const memory = memoryPolicy({ halfLifeHours: 72, gateThreshold: 0.15 });
const NOW = 30 * DAY_MS;

const validityArb = fc.oneof(
  fc.constant({ volatile: false }),
  fc.constant({ volatile: true }),
  fc.record({ volatile: fc.constant(true), freshUntil: fc.integer({ min: 0, max: 2 * NOW }) }),
);

function entryOf(i: number, validity: { volatile: boolean; freshUntil?: number }, writtenAt: number): Entry {
  return buildEntry(
    `e${i}`,
    'agent',
    {
      text: `The north dock closes at 18:00, item ${i}.`,
      kind: 'fact',
      salience: 0.9,
      source: { origin: 'agent' },
      confidence: 0.5,
      verified: false,
      ...validity,
      writtenAt,
    },
    memory,
  );
}

describe('what a summary may merge (fast-check)', () => {
  it('never a volatile entry, so every summary consolidation builds is durable and never lapses', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ validity: validityArb, writtenAt: fc.integer({ min: 0, max: NOW }) }), {
          minLength: 1,
          maxLength: 8,
        }),
        (raw) => {
          const entries = raw.map((r, i) => entryOf(i, r.validity, r.writtenAt));
          const merged = entries.filter((e) => clusterable(e, NOW));
          for (const e of merged) expect(e.validity.volatile).toBe(false);
          expect(merged.length).toBe(entries.filter((e) => !e.validity.volatile).length);
          fc.pre(merged.length > 0);
          const texts = merged.map((e) => ({ id: e._id, text: e.text }));
          const text = texts.map((t) => t.text).join('\n');
          const summary = buildSummaryEntry('s', merged, text, assessSummary(texts, text), {
            asOf: NOW,
            runId: 'run',
            policy: memory,
          });
          expect(summary.validity).toEqual({ volatile: false });
          expect(summary.pending).not.toContain('expire');
        },
      ),
    );
  });
});

const linkArb = fc.record({ summaryId: fc.constantFrom('s1', 's2', 's3'), lossless: fc.boolean() });
const sourceArb = fc.record({
  kind: fc.constantFrom('fact' as const, 'episode' as const, 'summary' as const),
  isActive: fc.boolean(),
  subsumedBy: fc.option(fc.uniqueArray(linkArb, { selector: (l) => l.summaryId }), { nil: undefined }),
  pending: fc.option(fc.subarray<PendingWork>(['terms', 'cluster', 'supersede', 'expire']), {
    nil: undefined,
  }),
});

describe('links between a summary and its sources (fast-check)', () => {
  it('a released source links the summary no more, keeps its other links and work, and a current one awaits clustering', () => {
    fc.assert(
      fc.property(sourceArb, fc.constantFrom('s1', 's2', 's3'), (source, summaryId) => {
        const patch = releasePatch(source, summaryId);
        const linked = source.subsumedBy?.some((l) => l.summaryId === summaryId) ?? false;
        if (!linked || !patch) {
          expect({ linked, patch }).toEqual({ linked: false, patch: undefined });
          return;
        }
        const after = applyPatch(source, patch);
        expect(after.subsumedBy?.some((l) => l.summaryId === summaryId) ?? false).toBe(false);
        expect(after.subsumedBy ?? []).toEqual(source.subsumedBy!.filter((l) => l.summaryId !== summaryId));
        for (const work of source.pending ?? []) expect(after.pending).toContain(work);
        const current = source.kind !== 'summary' && source.isActive;
        expect(after.pending?.includes('cluster') ?? false).toBe(
          current || (source.pending?.includes('cluster') ?? false),
        );
        // A rerun changes nothing.
        expect(releasePatch(after, summaryId)).toBeUndefined();
      }),
    );
  });

  it('a claim leaves exactly one link to the summary, saying what it was told; only a linking claim adds one', () => {
    fc.assert(
      fc.property(
        sourceArb,
        fc.constantFrom('s1', 's2', 's3'),
        fc.boolean(),
        fc.boolean(),
        (source, summaryId, lossless, link) => {
          const patch = claimPatch(source, summaryId, lossless, { link });
          const after = patch ? applyPatch(source, patch) : source;
          const links = (after.subsumedBy ?? []).filter((l) => l.summaryId === summaryId);
          const had = source.subsumedBy?.some((l) => l.summaryId === summaryId) ?? false;
          if (had || link) expect(links).toEqual([{ summaryId, lossless }]);
          else expect(links).toEqual([]);
          const others = (l: { summaryId: string }) => l.summaryId !== summaryId;
          expect((after.subsumedBy ?? []).filter(others)).toEqual((source.subsumedBy ?? []).filter(others));
          expect(claimPatch(after, summaryId, lossless, { link })).toBeUndefined();
        },
      ),
    );
  });

  it('retiring deactivates an active summary once', () => {
    fc.assert(
      fc.property(fc.boolean(), (isActive) => {
        const patch = retirePatch({ isActive });
        const after = patch ? applyPatch({ isActive }, patch) : { isActive };
        expect(after.isActive).toBe(false);
        expect(retirePatch(after)).toBeUndefined();
      }),
    );
  });
});

describe('supersededTonight (fast-check)', () => {
  it('carries every supersession of a pending fact or by one into the summaries, and no other', () => {
    const ids = ['a', 'b', 'c', 'd', 'e', 'f'];
    fc.assert(
      fc.property(
        fc.array(fc.record({ id: fc.constantFrom(...ids), by: fc.option(fc.constantFrom(...ids)) })),
        fc.array(fc.record({ olderId: fc.constantFrom(...ids), newerId: fc.constantFrom(...ids) })),
        fc.subarray(ids),
        (rawFacts, steps: SupersessionStep[], pending) => {
          const facts = [...new Map(rawFacts.map((f) => [f.id, f])).values()].map((f) => ({
            _id: f.id,
            ...(f.by !== null && { supersededBy: f.by }),
          }));
          const pendingIds = new Set(pending);
          const carried = supersededTonight(facts, steps, pendingIds);
          const successor = new Map<string, string>();
          for (const f of facts) if (f.supersededBy !== undefined) successor.set(f._id, f.supersededBy);
          for (const s of steps) successor.set(s.olderId, s.newerId);
          const expected = [...successor]
            .filter(([older, newer]) => pendingIds.has(older) || pendingIds.has(newer))
            .map(([sourceId, supersededBy]) => ({ sourceId, supersededBy }));
          expect(new Set(carried.map((c) => JSON.stringify(c)))).toEqual(
            new Set(expected.map((c) => JSON.stringify(c))),
          );
          expect(carried.map((c) => c.sourceId)).toEqual(carried.map((c) => c.sourceId).sort());
        },
      ),
    );
  });
});

describe('the nightly pass keeps summaries current (fast-check over the in-memory store)', () => {
  const config = parseConfig({ MEMGATE_HOT_CAPACITY: '40', MEMGATE_LOW_WATERMARK: '0.8' });
  const SUBJECTS = ['backup', 'invoice', 'badge'];
  const ATTRIBUTES = ['retention', 'owner'];
  const PLACES = ['Frankfurt', 'Dublin', 'Lisbon'];

  const writeArb = fc.record({
    day: fc.integer({ min: 0, max: 5 }),
    subject: fc.constantFrom(...SUBJECTS),
    attribute: fc.option(fc.constantFrom(...ATTRIBUTES), { nil: undefined }),
    value: fc.integer({ min: 1, max: 60 }),
    place: fc.constantFrom(...PLACES),
    volatile: fc.boolean(),
  });

  it('after every night, no active summary holds a superseded or volatile entry, and no entry links a retired one', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(writeArb, { minLength: 2, maxLength: 30 }), async (writes) => {
        const sim = new SimStore('agent', simPolicy(config), 'memgate', SUBJECTS);
        for (let day = 0; day <= 6; day++) {
          writes.forEach((w, i) => {
            if (w.day !== day) return;
            const at = day * DAY_MS + 10 * HOUR_MS + i;
            const text = w.attribute
              ? `The ${w.subject} ${w.attribute} is ${w.value} days, kept in the ${w.place} region.`
              : `The ${w.subject} records are kept in the ${w.place} region.`;
            sim.write({
              type: 'write',
              at,
              role: w.attribute ? 'update' : 'chatter',
              subject: w.subject,
              entry: {
                text,
                kind: w.attribute ? 'fact' : 'episode',
                salience: 0.9,
                writtenAt: at,
                idempotencyKey: `w${i}`,
                ...(w.attribute && { subject: w.subject, attribute: w.attribute }),
                ...(w.volatile && { volatile: true, freshUntil: at + 2 * DAY_MS }),
              },
            });
          });
          await sim.night((day + 1) * DAY_MS + 3 * HOUR_MS);
          expectCurrentSummaries(new Map([...sim.cold, ...sim.hot]));
        }
      }),
      { numRuns: 60 },
    );
  });
});

function expectCurrentSummaries(stored: ReadonlyMap<string, Entry>): void {
  for (const summary of stored.values()) {
    if (summary.kind !== 'summary') continue;
    for (const id of summary.derivedFrom ?? []) {
      const source = stored.get(id);
      if (!source) continue;
      expect(source.validity.volatile, `${summary._id} holds volatile ${id}`).toBe(false);
      if (summary.isActive) expect(source.isActive, `${summary._id} holds superseded ${id}`).toBe(true);
      else
        expect(
          source.subsumedBy?.some((l) => l.summaryId === summary._id) ?? false,
          `${id} links retired ${summary._id}`,
        ).toBe(false);
    }
  }
}
