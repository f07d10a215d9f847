import { MemgateError } from '../errors';
import { describePin, type PinRef, type SegmentRef } from './model';

/** Why the window refused to take a segment in (docs/windows.md, Context windows). */
export type BlockReason =
  /** Its salience is below the rehydration threshold. */
  | 'belowThreshold'
  /** Its own eviction was forced by a pinned displacer, and that pin still holds. */
  | 'evictedByLivePin'
  /** The window never held it and has no slack: a fresh score alone never displaces anything. */
  | 'neverAdmittedAtCapacity'
  /** Only displacing a pinned segment would make room. */
  | 'wouldDisplacePinned'
  /** Unpinned segments could make room, but the incoming salience does not beat them by the margin. */
  | 'marginNotMet'
  /** Every unpinned segment together does not free enough tokens. */
  | 'noUnpinnedRoom';

export interface Refusal {
  operation: 'admit' | 'rehydrate';
  turn: number;
  reasons: BlockReason[];
  incoming: SegmentRef;
  /** What taking it in would have pushed out (empty when room was not the problem). */
  wouldDisplace: (SegmentRef & { pinned: boolean })[];
  /** The pins that stand in the way. */
  pins: PinRef[];
}

const REASON_TEXT: Record<BlockReason, string> = {
  belowThreshold: 'its salience is below the rehydration threshold',
  evictedByLivePin: 'its eviction was forced by a pinned displacer whose pin still holds',
  neverAdmittedAtCapacity: 'it was never in this window and the window has no slack',
  wouldDisplacePinned: 'making room would displace a pinned segment',
  marginNotMet: 'its salience does not beat the segments it would displace by the margin',
  noUnpinnedRoom: 'the unpinned segments together cannot free enough tokens',
};

/**
 * The window refused to admit or rehydrate a segment rather than push out a pinned one or
 * thrash; nothing changed. The caller routes around it (e.g. answers from a resident summary).
 */
export class RehydrationBlocked extends MemgateError {
  readonly type = 'RehydrationBlocked' as const;
  readonly operation: Refusal['operation'];
  readonly turn: number;
  readonly reasons: BlockReason[];
  readonly incoming: SegmentRef;
  readonly wouldDisplace: Refusal['wouldDisplace'];
  readonly pins: PinRef[];

  constructor(refusal: Refusal) {
    const pins = refusal.pins.map((p) => `${p.segmentId} (${describePin(p.pin)})`);
    super(
      `${refusal.operation} of ${refusal.incoming.id} refused at turn ${refusal.turn}: ` +
        refusal.reasons.map((r) => REASON_TEXT[r]).join('; ') +
        (pins.length ? `; pins involved: ${pins.join(', ')}` : ''),
      { ...refusal },
    );
    this.operation = refusal.operation;
    this.turn = refusal.turn;
    this.reasons = refusal.reasons;
    this.incoming = refusal.incoming;
    this.wouldDisplace = refusal.wouldDisplace;
    this.pins = refusal.pins;
  }
}
