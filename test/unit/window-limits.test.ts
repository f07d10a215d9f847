import { describe, expect, it } from 'vitest';
import { encodedBytes } from '../../core/entry';
import { ConflictError, InvalidInputError } from '../../core/errors';
import {
  admit,
  MAX_PINS_PER_SEGMENT,
  MAX_WINDOW_CAPACITY,
  MAX_WINDOW_SEGMENTS,
  MAX_WINDOW_STATE_BYTES,
  openWindow,
  pin,
  RehydrationBlocked,
  stateBytesBound,
  type WindowState,
} from '../../core/window';

/**
 * A window's state is carried whole through continue-as-new, under Temporal's 2 MB payload
 * limit (docs/invariants.md, Window state is bounded): bounded by segments as well as tokens,
 * with a ceiling on capacity, pins and bytes.
 */
const TEMPORAL_PAYLOAD_LIMIT = 2 * 1024 * 1024;
const SETTINGS = { capacity: 40_000, decay: 0.85, rehydrationThreshold: 0.6, margin: 0.1 };
/** The longest id and label the schemas allow. */
const longId = (i: number) => `s${String(i).padStart(127, '0')}`;
const LONG_LABEL = 'l'.repeat(200);

describe('window limits', () => {
  it('holds at most MAX_WINDOW_SEGMENTS segments: one-token admits past it displace, and the state stays small', () => {
    // Before the bound, one-token admits at the default capacity piled up: 6,000 of them left
    // 2.6 MB of state, past what continue-as-new can carry.
    let state: WindowState = openWindow(SETTINGS);
    for (let i = 0; i < 2_500; i++) {
      state = admit(state, { segmentId: `chat-${i}`, tokens: 1, salience: 0.5 }).state;
      expect(state.segments.length).toBeLessThanOrEqual(MAX_WINDOW_SEGMENTS);
    }
    expect(state.segments).toHaveLength(MAX_WINDOW_SEGMENTS);
    // The cheapest went first: the newest are resident.
    expect(state.segments.at(-1)!.id).toBe('chat-2499');
    expect(state.segments.some((s) => s.id === 'chat-0')).toBe(false);
    expect(encodedBytes(state)).toBeLessThan(TEMPORAL_PAYLOAD_LIMIT / 4);
  });

  it('refuses, typed, an entry at the segment bound when every resident segment is pinned', () => {
    let state = openWindow(SETTINGS);
    for (let i = 0; i < MAX_WINDOW_SEGMENTS; i++) {
      state = admit(state, {
        segmentId: `p-${i}`,
        tokens: 1,
        salience: 0.5,
        pin: { kind: 'explicit' },
      }).state;
    }
    expect(() => admit(state, { segmentId: 'one-more', tokens: 1, salience: 0.9 })).toThrow(
      RehydrationBlocked,
    );
  });

  it('has a ceiling on capacity and on the pins of a segment', () => {
    expect(() => openWindow({ ...SETTINGS, capacity: MAX_WINDOW_CAPACITY + 1 })).toThrow(InvalidInputError);
    expect(() => openWindow({ ...SETTINGS, retainedEvictions: 1_001 })).toThrow(InvalidInputError);
    let state = admit(openWindow(SETTINGS), { segmentId: 'a', tokens: 10, salience: 0.5 }).state;
    for (let loop = 0; loop < MAX_PINS_PER_SEGMENT; loop++) {
      state = pin(state, { segmentId: 'a', pin: { kind: 'toolLoop', loopId: `loop-${loop}` } }).state;
    }
    expect(() => pin(state, { segmentId: 'a', pin: { kind: 'explicit' } })).toThrow(ConflictError);
  });

  it('refuses entries past its byte bound, and no update takes it past what continue-as-new carries', () => {
    // Every field at its longest. First the largest single update: a segment that displaces a
    // full window of 1,000 at once; then long pins on every segment until the bound refuses.
    let state = openWindow({ ...SETTINGS, capacity: 1_000_000 });
    let largest = 0;
    const apply = (next: () => { state: WindowState }) => {
      state = next().state;
      const bytes = encodedBytes(state);
      // The bound the window checks is never below the bytes the state encodes to.
      expect(stateBytesBound(state)).toBeGreaterThanOrEqual(bytes);
      largest = Math.max(largest, bytes);
    };
    const long = (i: number, tokens: number) => ({
      segmentId: longId(i),
      tokens,
      salience: 0.5,
      label: LONG_LABEL,
    });
    for (let i = 0; i < MAX_WINDOW_SEGMENTS; i++) apply(() => admit(state, long(i, 1_000)));
    apply(() => admit(state, { ...long(1_000, 1_000_000), pin: { kind: 'toolLoop', loopId: longId(0) } }));
    expect(state.segments).toHaveLength(1);
    let refused: unknown;
    try {
      for (let i = 1_001; i < 2_000; i++) {
        apply(() => admit(state, { ...long(i, 1), salience: 0.9 }));
      }
    } catch (err) {
      refused = err;
    }
    try {
      for (const segment of [...state.segments]) {
        for (let p = segment.pins.length; p < MAX_PINS_PER_SEGMENT; p++) {
          apply(() => pin(state, { segmentId: segment.id, pin: { kind: 'toolLoop', loopId: longId(p) } }));
        }
      }
    } catch (err) {
      refused ??= err;
    }
    expect(refused).toBeInstanceOf(ConflictError);
    expect((refused as ConflictError).details).toMatchObject({ maxStateBytes: MAX_WINDOW_STATE_BYTES });
    expect(largest).toBeLessThan(TEMPORAL_PAYLOAD_LIMIT);
  });
});
