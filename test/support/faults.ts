import type { Tier } from '../../core/entry';
import type { Store } from '../../store/db';

type Method = 'deleteOne' | 'replaceOne' | 'updateOne' | 'bulkWrite' | 'insertMany';

/** Which calls a fault may fire on (all, unless narrowed by their arguments). */
type CallMatch = (args: unknown[]) => boolean;

/**
 * Run `hook` (given the call's arguments) right before the next matching call of one
 * collection method of a tier, then either let the call through or fail it without reaching
 * the server. Later calls go through. Works on a running worker's store too, since
 * activities read `store.hot` / `store.cold` at call time. Returns an undo function.
 */
function interceptOnce(
  store: Store,
  tier: Tier,
  method: Method,
  hook: (args: unknown[]) => Promise<void>,
  fail: boolean,
  matches: CallMatch = () => true,
): () => void {
  const original = store[tier];
  let fired = false;
  store[tier] = new Proxy(original, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function') return value;
      const bound = (value as (...a: unknown[]) => unknown).bind(target);
      if (prop !== method) return bound;
      return async (...args: unknown[]) => {
        if (!fired && matches(args)) {
          fired = true;
          await hook(args);
          if (fail) throw new Error(`injected failure before ${tier}.${method}`);
        }
        return bound(...args);
      };
    },
  });
  return () => {
    store[tier] = original;
  };
}

/** The next call fails as if the process died right before it; `before` sees the store then. */
export function failOnce(
  store: Store,
  tier: Tier,
  method: Method,
  before: (args: unknown[]) => Promise<void> = async () => undefined,
  matches?: CallMatch,
): () => void {
  return interceptOnce(store, tier, method, before, true, matches);
}

/** Something else writes right before the next matching call (a concurrent change). */
export function interleaveOnce(
  store: Store,
  tier: Tier,
  method: Method,
  write: () => Promise<void>,
  matches?: CallMatch,
): () => void {
  return interceptOnce(store, tier, method, write, false, matches);
}
