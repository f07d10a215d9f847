import {
  allHandlersFinished,
  condition,
  continueAsNew,
  defineQuery,
  defineUpdate,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { UpdateDefinition } from '@temporalio/common';
import { asApplicationFailure } from './failures';
import {
  admit,
  advanceTurn,
  openWindow,
  pin,
  rehydrate,
  unpin,
  validateAdmit,
  validateAdvanceTurn,
  validatePin,
  validateRehydrate,
  validateUnpin,
  viewWindow,
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
  type WindowView,
} from '../core/window';

export interface ContextWindowInput {
  sessionId: string;
  settings: WindowSettingsInput;
  /** Carried across continue-as-new. */
  state?: WindowState;
}

export const admitUpdate = defineUpdate<EntryResult, [AdmitInput]>('admit');
export const rehydrateUpdate = defineUpdate<EntryResult, [RehydrateInput]>('rehydrate');
export const pinUpdate = defineUpdate<Segment, [PinInput]>('pin');
export const unpinUpdate = defineUpdate<UnpinResult, [UnpinInput]>('unpin');
export const advanceTurnUpdate = defineUpdate<TurnResult, [AdvanceTurnInput]>('advanceTurn');
export const windowQuery = defineQuery<WindowView>('window');

export function contextWindowWorkflowId(sessionId: string): string {
  return `memgate-window-${sessionId}`;
}

/**
 * One context window per agent session. Validators reject bad input before it reaches
 * history; every decision (admission, eviction, swap, refusal) is an Update outcome in history.
 */
export async function contextWindow(input: ContextWindowInput): Promise<void> {
  let state: WindowState;
  try {
    state = input.state ?? openWindow(input.settings);
  } catch (err) {
    throw asApplicationFailure(err);
  }

  function handle<R, I>(
    update: UpdateDefinition<R, [I]>,
    apply: (s: WindowState, input: unknown) => Transition<R>,
    validate: (s: WindowState, input: unknown) => unknown,
  ): void {
    setHandler(
      update,
      (req: I) => {
        try {
          const next = apply(state, req);
          state = next.state;
          return next.result;
        } catch (err) {
          throw asApplicationFailure(err);
        }
      },
      {
        validator: (req: I) => {
          try {
            validate(state, req);
          } catch (err) {
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
  setHandler(windowQuery, () => viewWindow(state));

  await condition(() => workflowInfo().continueAsNewSuggested);
  await condition(allHandlersFinished);
  await continueAsNew<typeof contextWindow>({ sessionId: input.sessionId, settings: input.settings, state });
}
