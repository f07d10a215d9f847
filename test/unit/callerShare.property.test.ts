import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CallerShare, type Place } from '../../core/callerShare';

/**
 * A caller's share of a serving process (core/callerShare.ts): whatever the calls that come
 * and go, no more run than its bound, no more wait than theirs, places are granted in the
 * order they were asked for, and a call is refused only when both are full.
 */
describe('CallerShare', () => {
  it('bounds what runs and waits, grants in arrival order, and refuses only when full (fast-check)', async () => {
    const step = fc.oneof(
      fc.constant({ kind: 'come' as const }),
      fc.record({ kind: fc.constant('done' as const), which: fc.nat() }),
      fc.record({ kind: fc.constant('gone' as const), which: fc.nat() }),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 0, max: 4 }),
        fc.array(step, { maxLength: 60 }),
        async (maxRunning, maxQueued, steps) => {
          const share = new CallerShare(maxRunning, maxQueued);
          const running: Place[] = [];
          const waiting: Place[] = [];
          const grantedOrder: number[] = [];
          const askedOrder = new Map<Place, number>();
          let asked = 0;
          for (const s of steps) {
            if (s.kind === 'come') {
              const full = running.length === maxRunning && waiting.length === maxQueued;
              const place = share.take();
              if (place === 'refused') {
                expect(full).toBe(true);
                continue;
              }
              expect(full).toBe(false);
              askedOrder.set(place, asked++);
              if (place.isGranted) {
                expect(waiting).toEqual([]);
                running.push(place);
                grantedOrder.push(askedOrder.get(place)!);
              } else waiting.push(place);
            } else if (s.kind === 'done' && running.length > 0) {
              const [place] = running.splice(s.which % running.length, 1);
              share.leave(place!);
              const next = waiting.shift();
              if (next) {
                expect(next.isGranted).toBe(true);
                running.push(next);
                grantedOrder.push(askedOrder.get(next)!);
              }
            } else if (s.kind === 'gone' && waiting.length > 0) {
              const [place] = waiting.splice(s.which % waiting.length, 1);
              share.leave(place!);
              expect(place!.isGranted).toBe(false);
            }
            expect(share.counts).toEqual({ running: running.length, waiting: waiting.length });
            expect(running.length).toBeLessThanOrEqual(maxRunning);
            expect(waiting.length).toBeLessThanOrEqual(maxQueued);
            expect(share.idle).toBe(running.length === 0 && waiting.length === 0);
          }
          // Granted in the order asked, but for those that left the line before their turn.
          expect(grantedOrder).toEqual([...grantedOrder].sort((a, b) => a - b));
          for (const place of running) await place.granted;
        },
      ),
    );
  });
});
