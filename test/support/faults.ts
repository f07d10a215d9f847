import type { Tier } from '../../core/entry';
import type { Store } from '../../store/db';

/** The collections a fault can sit in front of. */
type Faultable =
  Tier | 'tombstones' | 'vectors' | 'vectorFeeds' | 'keyClaims' | 'ledger' | 'agents' | 'entryIds';

type Method =
  | 'find'
  | 'findOne'
  | 'findOneAndDelete'
  | 'deleteOne'
  | 'deleteMany'
  | 'replaceOne'
  | 'updateOne'
  | 'bulkWrite'
  | 'insertMany';

/** Which calls a fault may fire on (all, unless narrowed by their arguments). */
type CallMatch = (args: unknown[]) => boolean;

/**
 * Run `hook` (given the call's arguments) right before the next matching call of one
 * collection method of a tier, then either let the call through or fail it without reaching
 * the server (a find's at its `toArray`, or its first document read one at a time). Later calls go through. Works on a running worker's store too, since
 * activities read `store.hot` / `store.cold` at call time. Returns an undo function.
 */
function interceptOnce(
  store: Store,
  tier: Faultable,
  method: Method,
  hook: (args: unknown[]) => Promise<void>,
  fail: boolean,
  matches: CallMatch = () => true,
): () => void {
  const original = store[tier] as object;
  let fired = false;
  (store as unknown as Record<Faultable, object>)[tier] = new Proxy(original, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function') return value;
      const bound = (value as (...a: unknown[]) => unknown).bind(target);
      if (prop !== method) return bound;
      const intercepted = async (args: unknown[], call: () => Promise<unknown>) => {
        await hook(args);
        if (fail) throw new Error(`injected failure before ${tier}.${method}`);
        return call();
      };
      return (...args: unknown[]) => {
        if (fired || !matches(args)) return bound(...args);
        fired = true;
        if (method !== 'find') return intercepted(args, () => bound(...args) as Promise<unknown>);
        // A find returns its cursor at once; the read happens at `toArray`, so the fault sits there.
        const cursor = bound(...args) as { toArray: () => Promise<unknown> };
        return new Proxy(cursor, {
          get(target, prop) {
            if (prop === 'toArray') return () => intercepted(args, () => target.toArray());
            // Read a document at a time (store/db.ts, inBatches): the fault sits at the first.
            if (prop === Symbol.asyncIterator) {
              return async function* () {
                await intercepted(args, async () => undefined);
                yield* target as unknown as AsyncIterable<unknown>;
              };
            }
            const value: unknown = Reflect.get(target, prop);
            return typeof value === 'function' ? (value as () => unknown).bind(target) : value;
          },
        });
      };
    },
  });
  return () => {
    (store as unknown as Record<Faultable, object>)[tier] = original;
  };
}

/** The next call fails as if the process died right before it; `before` sees the store then. */
export function failOnce(
  store: Store,
  tier: Faultable,
  method: Method,
  before: (args: unknown[]) => Promise<void> = async () => undefined,
  matches?: CallMatch,
): () => void {
  return interceptOnce(store, tier, method, before, true, matches);
}

/** Something else writes right before the next matching call (a concurrent change). */
export function interleaveOnce(
  store: Store,
  tier: Faultable,
  method: Method,
  write: (args: unknown[]) => Promise<void>,
  matches?: CallMatch,
): () => void {
  return interceptOnce(store, tier, method, write, false, matches);
}

/**
 * The collection, each method call shown to `observe` (its name and arguments) as it is made,
 * then let through unchanged: for counting what a step sends to the store.
 */
export function observed<C extends object>(
  collection: C,
  observe: (method: string | symbol, args: unknown[]) => void,
): C {
  return new Proxy(collection, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function') return value;
      const bound = (value as (...a: unknown[]) => unknown).bind(target);
      return (...args: unknown[]) => {
        observe(prop, args);
        return bound(...args);
      };
    },
  });
}
