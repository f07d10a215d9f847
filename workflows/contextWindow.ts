import {
  allHandlersFinished,
  condition,
  defineQuery,
  defineUpdate,
  metricMeter,
  setHandler,
} from '@temporalio/workflow';
import type { UpdateDefinition } from '@temporalio/common';
import { z } from 'zod';
import { asApplicationFailure } from '../core/failures';
import { handOverSuggested, handOverToCurrentVersion, wakeOnHandOverSignal } from './support';
import { RehydrationBlocked } from '../core/window/blocked';
import {
  admit,
  advanceTurn,
  openWindow,
  parseWith,
  pin,
  rehydrate,
  sessionClosed,
  sessionIdSchema,
  summariseWindow,
  unpin,
  validateAdmit,
  validateAdvanceTurn,
  validatePin,
  validateRehydrate,
  validateUnpin,
  viewWindow,
  windowStateSchema,
  type AdmitInput,
  type AdvanceTurnInput,
  type EntryResult,
  type PinInput,
  type RehydrateInput,
  type Segment,
  type Transition,
  type TurnResult,
  type UnpinInput,
  type UnpinResult,
  type WindowSettingsInput,
  type WindowState,
  type WindowSummary,
  type WindowView,
} from '../core/window';

const contextWindowInputSchema = z.object({
  sessionId: sessionIdSchema,
  /** Checked as the window opens (openWindow), when no state is carried. */
  settings: z.unknown(),
  /** Carried across continue-as-new. */
  state: windowStateSchema.optional(),
  /**
   * Hand over to a new run after this many Updates, before the server suggests it: how tests
   * reach the hand-over (as Temporal's samples do). Unset in production.
   */
  continueAsNewAfterUpdates: z.number().int().positive().optional(),
});

export interface ContextWindowInput {
  sessionId: string;
  settings: WindowSettingsInput;
  state?: WindowState;
  continueAsNewAfterUpdates?: number;
}

export const admitUpdate = defineUpdate<EntryResult, [AdmitInput]>('admit');
export const rehydrateUpdate = defineUpdate<EntryResult, [RehydrateInput]>('rehydrate');
export const pinUpdate = defineUpdate<Segment, [PinInput]>('pin');
export const unpinUpdate = defineUpdate<UnpinResult, [UnpinInput]>('unpin');
export const advanceTurnUpdate = defineUpdate<TurnResult, [AdvanceTurnInput]>('advanceTurn');
/** Ends the session: the workflow completes with this summary, and later calls are a Conflict. */
export const closeUpdate = defineUpdate<WindowSummary, []>('close');
export const windowQuery = defineQuery<WindowView>('window');

export function contextWindowWorkflowId(sessionId: string): string {
  return `memgate-window-${sessionId}`;
}

/**
 * One context window per agent session. Validators reject bad input before it reaches
 * history; every decision (admission, eviction, swap, refusal) is an Update outcome in history.
 * The state it carries across continue-as-new is bounded (see retainEvictions).
 */
export async function contextWindow(raw: ContextWindowInput): Promise<WindowSummary> {
  let state: WindowState;
  let handOverAfter: number | undefined;
  const input = raw;
  try {
    const parsed = parseWith(contextWindowInputSchema, raw, 'context window');
    handOverAfter = parsed.continueAsNewAfterUpdates;
    state = parsed.state ?? openWindow(input.settings);
  } catch (err) {
    throw asApplicationFailure(err);
  }
  let updates = 0;
  // Operators watch refusals (docs/operations.md, Metrics); the SDK records nothing while it replays.
  const refusals = metricMeter.createCounter(
    'memgate_rehydrations_refused',
    'rehydrations',
    'rehydrations a context window refused (RehydrationBlocked)',
  );
  const countRefusal = (err: unknown) => {
    if (err instanceof RehydrationBlocked) refusals.add(1);
  };
  let closed = false;

  function requireOpen(): void {
    if (closed) throw asApplicationFailure(sessionClosed(input.sessionId));
  }

  function handle<R, I>(
    update: UpdateDefinition<R, [I]>,
    apply: (s: WindowState, input: unknown) => Transition<R>,
    validate: (s: WindowState, input: unknown) => unknown,
  ): void {
    setHandler(
      update,
      (req: I) => {
        updates++;
        try {
          const next = apply(state, req);
          state = next.state;
          return next.result;
        } catch (err) {
          countRefusal(err);
          throw asApplicationFailure(err);
        }
      },
      {
        validator: (req: I) => {
          requireOpen();
          try {
            validate(state, req);
          } catch (err) {
            countRefusal(err);
            throw asApplicationFailure(err);
          }
        },
      },
    );
  }

  handle(admitUpdate, admit, validateAdmit);
  handle(rehydrateUpdate, rehydrate, validateRehydrate);
  handle(pinUpdate, pin, validatePin);
  handle(unpinUpdate, unpin, validateUnpin);
  handle(advanceTurnUpdate, advanceTurn, validateAdvanceTurn);
  setHandler(
    closeUpdate,
    () => {
      closed = true;
      return summariseWindow(state);
    },
    { validator: requireOpen },
  );
  setHandler(windowQuery, () => viewWindow(state));
  wakeOnHandOverSignal();

  const handOverDue = () => handOverSuggested() || (handOverAfter !== undefined && updates >= handOverAfter);
  await condition(() => closed || handOverDue());
  await condition(allHandlersFinished);
  if (closed) return summariseWindow(state);
  return await handOverToCurrentVersion<typeof contextWindow>()({ ...input, state });
}
