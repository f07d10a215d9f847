import { ConflictError, InvalidInputError, NotFoundError } from '../errors';
import { RehydrationBlocked } from './blocked';
import { decideAdmission, decideRehydration, type WindowDecision } from './decide';
import { retainEvictions } from './retention';
import {
  MAX_PINS_PER_SEGMENT,
  MAX_WINDOW_STATE_BYTES,
  stateBytesBound,
  admitSchema,
  advanceTurnSchema,
  describePin,
  lastEviction,
  parseWith,
  pinRequestSchema,
  rehydrateSchema,
  samePin,
  unpinSchema,
  usedTokens,
  windowSettingsSchema,
  type EvictionRecord,
  type Pin,
  type PinRef,
  type Segment,
  type SegmentRef,
  type WindowSettingsInput,
  type WindowState,
} from './model';

/**
 * The window's operations as pure transitions: each validates its input against the current
 * state (throwing InvalidInputError, NotFoundError or ConflictError and changing nothing),
 * decides, and returns the next state with a result. A refusal throws RehydrationBlocked and
 * changes nothing. `validateX` runs only the input checks, for an Update validator.
 */
export interface Transition<R> {
  state: WindowState;
  result: R;
}

export interface EntryResult {
  turn: number;
  mode: Extract<WindowDecision, { action: 'admit' }>['mode'];
  segment: Segment;
  evicted: EvictionRecord[];
  used: number;
}

export interface UnpinResult {
  released: PinRef[];
}

export interface TurnResult {
  turn: number;
  /** Turn pins that expired with this turn. */
  lapsed: PinRef[];
}

export interface WindowView {
  turn: number;
  settings: WindowState['settings'];
  used: number;
  free: number;
  /** used / capacity. */
  occupancy: number;
  segments: Segment[];
  evictions: EvictionRecord[];
  /** Eviction records the window no longer holds (see retainEvictions). */
  evictionsDropped: number;
}

/** What a session's window comes to when it is closed. */
export interface WindowSummary {
  turn: number;
  /** Resident segments at the close. */
  segments: number;
  used: number;
  /** Every eviction over the session, whether its record is still held or not. */
  evictions: number;
}

export function openWindow(settings: WindowSettingsInput): WindowState {
  return {
    settings: parseWith(windowSettingsSchema, settings, 'window settings'),
    turn: 0,
    segments: [],
    evictions: [],
    evictionsDropped: 0,
  };
}

export function viewWindow(state: WindowState): WindowView {
  const used = usedTokens(state);
  return {
    turn: state.turn,
    settings: state.settings,
    used,
    free: state.settings.capacity - used,
    occupancy: used / state.settings.capacity,
    segments: state.segments,
    evictions: state.evictions,
    evictionsDropped: state.evictionsDropped,
  };
}

export function summariseWindow(state: WindowState): WindowSummary {
  return {
    turn: state.turn,
    segments: state.segments.length,
    used: usedTokens(state),
    evictions: state.evictions.length + state.evictionsDropped,
  };
}

/** Every call on a session after its close (the window workflow has ended). */
export function sessionClosed(sessionId: string): ConflictError {
  return new ConflictError(`session ${sessionId} is closed: open it again to start a new window`, {
    sessionId,
    closed: true,
  });
}

function resident(state: WindowState, segmentId: string): Segment | undefined {
  return state.segments.find((s) => s.id === segmentId);
}

/** The resident segment, or NotFound (never seen) / Conflict (evicted) naming the id. */
function requireResident(state: WindowState, segmentId: string): Segment {
  const segment = resident(state, segmentId);
  if (segment) return segment;
  const record = lastEviction(state, segmentId);
  if (record) {
    throw new ConflictError(`segment ${segmentId} is not in the window: evicted at turn ${record.turn}`, {
      segmentId,
      evictedAtTurn: record.turn,
    });
  }
  throw new NotFoundError(`segment ${segmentId} was never in this window`, { segmentId });
}

function requireFits(state: WindowState, tokens: number): void {
  if (tokens > state.settings.capacity) {
    throw new InvalidInputError('segment larger than the window', [
      { path: 'tokens', message: `${tokens} exceeds the capacity of ${state.settings.capacity} tokens` },
    ]);
  }
}

/** Past its byte bound a window takes nothing more in (docs/invariants.md, Window state is bounded). */
function requireStateRoom(state: WindowState): void {
  const bytes = stateBytesBound(state);
  if (bytes > MAX_WINDOW_STATE_BYTES) {
    throw new ConflictError(
      `the window's state holds ${bytes} bytes, past its bound of ${MAX_WINDOW_STATE_BYTES}: close this session and open another`,
      { stateBytes: bytes, maxStateBytes: MAX_WINDOW_STATE_BYTES },
    );
  }
}

function requireLivePin(state: WindowState, pin: Pin): void {
  if (pin.kind === 'untilTurn' && pin.expiresAtTurn <= state.turn) {
    throw new InvalidInputError('pin already expired', [
      { path: 'pin.expiresAtTurn', message: `must be after the current turn ${state.turn}` },
    ]);
  }
}

/** Pushes out `displace` and takes `segment` in, recording the swap on both sides. */
function enter(state: WindowState, segment: Segment, displace: Segment[], mode: EntryResult['mode']) {
  const evicted: EvictionRecord[] = displace.map((s) => ({
    segmentId: s.id,
    tokens: s.tokens,
    salience: s.salience,
    ...(s.label !== undefined && { label: s.label }),
    turn: state.turn,
    displacedBy: segment.id,
    displacerPinned: segment.pins.length > 0,
    displacerPins: segment.pins,
  }));
  const gone = new Set(displace.map((s) => s.id));
  const entered: Segment = { ...segment, displaced: displace.map((s) => s.id) };
  const next = retainEvictions({
    ...state,
    segments: [...state.segments.filter((s) => !gone.has(s.id)), entered],
    evictions: [...state.evictions, ...evicted],
  });
  return {
    state: next,
    result: { turn: state.turn, mode, segment: entered, evicted, used: usedTokens(next) },
  };
}

export function validateAdmit(state: WindowState, input: unknown) {
  const req = parseWith(admitSchema, input, 'admit');
  requireFits(state, req.tokens);
  requireStateRoom(state);
  if (resident(state, req.segmentId)) {
    throw new ConflictError(`segment ${req.segmentId} is already in the window`, {
      segmentId: req.segmentId,
    });
  }
  const record = lastEviction(state, req.segmentId);
  if (record) {
    throw new ConflictError(
      `segment ${req.segmentId} was evicted at turn ${record.turn}: bring it back with rehydrate`,
      { segmentId: req.segmentId, evictedAtTurn: record.turn },
    );
  }
  if (req.pin) requireLivePin(state, req.pin);
  return req;
}

export function admit(state: WindowState, input: unknown): Transition<EntryResult> {
  const req = validateAdmit(state, input);
  const segment: Segment = {
    id: req.segmentId,
    tokens: req.tokens,
    salience: req.salience,
    ...(req.label !== undefined && { label: req.label }),
    pins: req.pin ? [req.pin] : [],
    admittedAtTurn: state.turn,
    via: 'admit',
    displaced: [],
  };
  const decision = decideAdmission(state, segment);
  if (decision.action === 'refuse') throw new RehydrationBlocked(decision.refusal);
  return enter(state, segment, decision.displace, decision.mode);
}

export function validateRehydrate(state: WindowState, input: unknown) {
  const req = parseWith(rehydrateSchema, input, 'rehydrate');
  requireStateRoom(state);
  if (resident(state, req.segmentId)) {
    throw new ConflictError(`segment ${req.segmentId} is already in the window`, {
      segmentId: req.segmentId,
    });
  }
  const record = lastEviction(state, req.segmentId);
  if (!record && req.tokens === undefined) {
    throw new NotFoundError(
      `segment ${req.segmentId} was never in this window: give its tokens to admit it on score`,
      { segmentId: req.segmentId },
    );
  }
  if (record && req.tokens !== undefined && req.tokens !== record.tokens) {
    throw new InvalidInputError('tokens differ from the evicted segment', [
      { path: 'tokens', message: `segment ${req.segmentId} has ${record.tokens} tokens` },
    ]);
  }
  const tokens = record?.tokens ?? req.tokens!;
  requireFits(state, tokens);
  const label = req.label ?? record?.label;
  const incoming: SegmentRef = {
    id: req.segmentId,
    tokens,
    salience: req.salience,
    ...(label !== undefined && { label }),
  };
  return { incoming, record };
}

export function rehydrate(state: WindowState, input: unknown): Transition<EntryResult> {
  const { incoming, record } = validateRehydrate(state, input);
  const decision = decideRehydration(state, incoming, record);
  if (decision.action === 'refuse') throw new RehydrationBlocked(decision.refusal);
  const segment: Segment = {
    ...incoming,
    pins: [],
    admittedAtTurn: state.turn,
    via: 'rehydrate',
    displaced: [],
  };
  return enter(state, segment, decision.displace, decision.mode);
}

export function validatePin(state: WindowState, input: unknown) {
  const req = parseWith(pinRequestSchema, input, 'pin');
  const segment = requireResident(state, req.segmentId);
  requireLivePin(state, req.pin);
  if (segment.pins.some((p) => samePin(p, req.pin))) {
    throw new ConflictError(`segment ${req.segmentId} already holds pin ${describePin(req.pin)}`, {
      segmentId: req.segmentId,
      pin: req.pin,
    });
  }
  if (segment.pins.length >= MAX_PINS_PER_SEGMENT) {
    throw new ConflictError(
      `segment ${req.segmentId} already holds ${MAX_PINS_PER_SEGMENT} pins, the most a segment holds`,
      { segmentId: req.segmentId, pins: segment.pins },
    );
  }
  requireStateRoom(state);
  return { segment, pin: req.pin };
}

export function pin(state: WindowState, input: unknown): Transition<Segment> {
  const { segment, pin } = validatePin(state, input);
  const pinned: Segment = { ...segment, pins: [...segment.pins, pin] };
  const segments = state.segments.map((s) => (s.id === pinned.id ? pinned : s));
  return { state: { ...state, segments }, result: pinned };
}

/** The pins an unpin releases: a segment's explicit and turn pins, or every pin of one tool loop. */
export function validateUnpin(state: WindowState, input: unknown): PinRef[] {
  const req = parseWith(unpinSchema, input, 'unpin');
  if ('loopId' in req) {
    const held = state.segments.flatMap((s) =>
      s.pins
        .filter((p) => p.kind === 'toolLoop' && p.loopId === req.loopId)
        .map((pin) => ({ segmentId: s.id, pin })),
    );
    if (!held.length) {
      throw new ConflictError(`tool loop ${req.loopId} pins no segment`, { loopId: req.loopId });
    }
    return held;
  }
  const segment = requireResident(state, req.segmentId);
  const released = segment.pins.filter((p) => p.kind !== 'toolLoop');
  if (!released.length) {
    throw new ConflictError(
      segment.pins.length
        ? `segment ${segment.id} is held only by ${segment.pins.map(describePin).join(', ')}: it is released when the loop ends`
        : `segment ${segment.id} is not pinned`,
      { segmentId: segment.id, pins: segment.pins },
    );
  }
  return released.map((pin) => ({ segmentId: segment.id, pin }));
}

export function unpin(state: WindowState, input: unknown): Transition<UnpinResult> {
  const released = validateUnpin(state, input);
  const segments = state.segments.map((s) => ({
    ...s,
    pins: s.pins.filter((p) => !released.some((r) => r.segmentId === s.id && samePin(r.pin, p))),
  }));
  return { state: { ...state, segments }, result: { released } };
}

export function validateAdvanceTurn(state: WindowState, input: unknown): Map<string, number> {
  const req = parseWith(advanceTurnSchema, input, 'advanceTurn');
  const scores = new Map(Object.entries(req.scores));
  for (const id of scores.keys()) requireResident(state, id);
  return scores;
}

/** Next turn: scored segments take their score, the rest decay; turn pins that end now lapse. */
export function advanceTurn(state: WindowState, input: unknown): Transition<TurnResult> {
  const scores = validateAdvanceTurn(state, input);
  const turn = state.turn + 1;
  const lapsed: PinRef[] = [];
  const segments = state.segments.map((s) => {
    const pins = s.pins.filter((p) => {
      const ends = p.kind === 'untilTurn' && p.expiresAtTurn <= turn;
      if (ends) lapsed.push({ segmentId: s.id, pin: p });
      return !ends;
    });
    return { ...s, salience: scores.get(s.id) ?? s.salience * state.settings.decay, pins };
  });
  return { state: { ...state, turn, segments }, result: { turn, lapsed } };
}
