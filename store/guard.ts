/**
 * Every call to the store goes through here: admitted against the process's connection budget
 * (core/admission.ts), bounded by the store timeout, retried when it is a read that a network
 * fault interrupted, and failed as `StackUnavailable` naming the operation when the store does
 * not answer in time (docs/invariants.md, No store wedge). Callers keep the driver's own
 * collection API; the guard wraps each collection once, when the store opens.
 */
import {
  MongoNetworkError,
  MongoServerSelectionError,
  MongoTopologyClosedError,
  MongoDriverError,
  type AnyBulkWriteOperation,
  type BulkWriteResult,
  type Collection,
  type Document,
} from 'mongodb';
import { Admission, AdmissionTimeout, connectionBudget, type ConnectionBudget } from '../core/admission';
import { allWithin } from '../core/allWithin';
import type { Config } from '../core/config';
import { StackUnavailableError } from '../core/errors';
import { currentWorkClass } from './workClass';

export interface StoreLimits {
  /** The longest any one store call (or one batch of a cursor) may take, admission included. */
  timeoutMs: number;
  budget: ConnectionBudget;
}

export function storeLimitsOf(
  config: Pick<Config, 'storeConnections' | 'storeProcesses' | 'storeTimeoutMs'>,
): StoreLimits {
  return {
    timeoutMs: config.storeTimeoutMs,
    budget: connectionBudget({ connections: config.storeConnections, processes: config.storeProcesses }),
  };
}

/** What a timed-out call reports to whoever counts them (the processes' metrics). */
export type StoreTimeoutListener = (operation: string) => void;

const timeoutListeners = new Set<StoreTimeoutListener>();

/** Count the store calls that timed out in this process, by operation; returns the unsubscribe. */
export function onStoreTimeout(listener: StoreTimeoutListener): () => void {
  timeoutListeners.add(listener);
  return () => timeoutListeners.delete(listener);
}

/**
 * The process's admission to each store server, shared by every client of it the process
 * opens: the budget is the process's share of that server's connections, whichever client
 * spends it. Keyed by the URI's hosts, never by what follows them.
 */
const processAdmissions = new Map<
  string,
  { budget: ConnectionBudget; cursors: Admission; commands: Admission }
>();

function admissionFor(server: string, budget: ConnectionBudget) {
  const known = processAdmissions.get(server);
  if (!known) {
    const admission = {
      budget,
      cursors: new Admission(budget.cursors),
      commands: new Admission(budget.commands, budget.background),
    };
    processAdmissions.set(server, admission);
    return admission;
  }
  if (known.budget.perProcess !== budget.perProcess) {
    // Two budgets for one server in one process would spend two shares of its connections.
    throw new RangeError(
      `this process already spends a budget of ${known.budget.perProcess} connections of this store; a store opened with ${budget.perProcess} would add to it`,
    );
  }
  return known;
}

/** The hosts of a MongoDB URI: which server a budget is a share of. */
function serverOf(uri: string): string {
  const hosts = uri.slice(uri.indexOf('://') + 3).split(/[/?]/, 1)[0]!;
  return hosts.slice(hosts.lastIndexOf('@') + 1);
}

/**
 * The connections a command can hold at once at a FerretDB-on-PostgreSQL server: an update
 * holds each statement's query until the command ends, plus the transaction that writes; a
 * delete closes its query before it writes; the rest hold one.
 */
const HOLDS_QUERY_AND_WRITE = new Set([
  'updateOne',
  'updateMany',
  'replaceOne',
  'findOneAndUpdate',
  'findOneAndReplace',
  'findOneAndDelete',
  'createIndex',
]);

/**
 * Reads: retrying one that a network fault interrupted cannot change anything. (`find` and
 * `aggregate` return cursors, guarded on their own.)
 */
const READS = new Set(['findOne', 'countDocuments', 'estimatedDocumentCount', 'distinct']);

const GUARDED = new Set([
  ...HOLDS_QUERY_AND_WRITE,
  ...READS,
  'insertOne',
  'insertMany',
  'deleteOne',
  'deleteMany',
  'drop',
]);

/** The driver gave up waiting for a connection of its pool (its class is not exported). */
function poolWaitTimedOut(err: unknown): boolean {
  return err instanceof MongoDriverError && err.name === 'MongoWaitQueueTimeoutError';
}

function transient(err: unknown): boolean {
  return (
    err instanceof MongoNetworkError || err instanceof MongoServerSelectionError || poolWaitTimedOut(err)
  );
}

function unavailable(operation: string, timeoutMs: number, why: string): StackUnavailableError {
  return new StackUnavailableError(`the store did not answer ${operation} within ${timeoutMs} ms: ${why}`, {
    operation,
    timeoutMs,
  });
}

function timedOut(operation: string, timeoutMs: number, why: string): StackUnavailableError {
  for (const listener of timeoutListeners) listener(operation);
  return unavailable(operation, timeoutMs, why);
}

/** A driver failure that is the store's or the network's, as `StackUnavailable` naming the call. */
function asUnavailable(operation: string, timeoutMs: number, err: unknown): unknown {
  if (err instanceof MongoTopologyClosedError) return err;
  if (err instanceof MongoNetworkError && err.name === 'MongoNetworkTimeoutError') {
    return timedOut(operation, timeoutMs, 'no reply on its connection');
  }
  // A pool whose connections the server does not answer: the same as no answer.
  if (poolWaitTimedOut(err)) return timedOut(operation, timeoutMs, 'no connection of the pool came free');
  if (transient(err)) return unavailable(operation, timeoutMs, (err as Error).name);
  return err;
}

/** `work` within the deadline; past it, StackUnavailable, while `work` settles on its own. */
function withinDeadline<T>(
  work: Promise<T>,
  deadline: number,
  operation: string,
  timeoutMs: number,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(timedOut(operation, timeoutMs, 'no reply in time')),
      Math.max(0, deadline - Date.now()),
    );
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

class Guard {
  private readonly admission;

  constructor(
    uri: string,
    readonly limits: StoreLimits,
  ) {
    this.admission = admissionFor(serverOf(uri), limits.budget);
  }

  /**
   * One command: its units first, then the call, both within one deadline. The
   * units are given back when the call settles, not at the deadline: the server may still be
   * working on it, holding its connections.
   */
  async run<T>(
    operation: string,
    units: number,
    call: () => Promise<T>,
    opts: { read: boolean },
  ): Promise<T> {
    const { timeoutMs } = this.limits;
    const deadline = Date.now() + timeoutMs;
    for (let pause = 50; ; pause *= 2) {
      const release = await this.admit(this.admission.commands, operation, units, deadline);
      const work = call();
      work.then(release, release);
      try {
        return await withinDeadline(work, deadline, operation, timeoutMs);
      } catch (err) {
        // Only a read is tried again, and only while the deadline leaves room to.
        if (!opts.read || !transient(err) || Date.now() + pause >= deadline) {
          throw asUnavailable(operation, timeoutMs, err);
        }
        await new Promise((r) => setTimeout(r, pause));
      }
    }
  }

  private async admit(
    pool: Admission,
    operation: string,
    units: number,
    deadline: number,
  ): Promise<() => void> {
    try {
      return await pool.acquire(units, deadline, currentWorkClass());
    } catch (err) {
      if (err instanceof AdmissionTimeout) {
        throw timedOut(
          operation,
          this.limits.timeoutMs,
          `this process's store connections were all in use (${err.message})`,
        );
      }
      throw err;
    }
  }

  /**
   * A cursor read whole: one command unit for the whole read (its reader does nothing else
   * meanwhile), each batch within the timeout; a read a network fault interrupted starts again.
   */
  private async toArray(operation: string, cursor: Cursor): Promise<unknown[]> {
    const { timeoutMs } = this.limits;
    const giveUpAt = Date.now() + timeoutMs;
    for (let pause = 50; ; pause *= 2) {
      const release = await this.admit(this.admission.commands, operation, 1, Date.now() + timeoutMs);
      const reading = cursor.clone();
      const docs: unknown[] = [];
      let batch: Promise<unknown> = Promise.resolve();
      try {
        for (;;) {
          batch = reading.next();
          const doc = await withinDeadline(batch, Date.now() + timeoutMs, operation, timeoutMs);
          if (doc === null) return docs;
          docs.push(doc);
        }
      } catch (err) {
        if (!transient(err) || Date.now() + pause >= giveUpAt) throw asUnavailable(operation, timeoutMs, err);
        await new Promise((r) => setTimeout(r, pause));
      } finally {
        // Past its deadline the batch may still hold its connection at the server: the unit
        // comes back once it settles, as a command's does (run), and the cursor closes after.
        void batch
          .catch(() => undefined)
          .then(() => reading.close())
          .catch(() => undefined)
          .finally(release);
      }
    }
  }

  /** A collection whose calls all go through `run`. */
  collection<T extends Document>(collection: Collection<T>): Collection<T> {
    const name = collection.collectionName;
    return new Proxy(collection, {
      get: (target, prop) => {
        const value = Reflect.get(target, prop) as unknown;
        if (typeof prop !== 'string' || typeof value !== 'function') return value;
        const method = value as (...args: unknown[]) => unknown;
        const operation = `${name}.${prop}`;
        if (prop === 'find' || prop === 'aggregate') {
          return (...args: unknown[]) => this.cursor(operation, method.apply(target, args) as Cursor);
        }
        if (prop === 'bulkWrite') {
          return (ops: AnyBulkWriteOperation<T>[], options?: { ordered?: boolean }) =>
            this.bulkWrite(operation, target, ops, options);
        }
        if (!GUARDED.has(prop)) return method.bind(target);
        const units = HOLDS_QUERY_AND_WRITE.has(prop) ? 2 : 1;
        return (...args: unknown[]) =>
          this.run(operation, units, () => method.apply(target, args) as Promise<unknown>, {
            read: READS.has(prop),
          });
      },
    });
  }

  /**
   * A bulk write in commands of at most `updatesPerCommand` statements, one after another in
   * the caller's order, each admitted for the connections its updates can hold. An unordered
   * one (`ordered: false`) is sent in smaller commands a few at a time (`unordered` of the
   * budget): its statements are independent, and the server runs those of one command one
   * after another. Every command is sent, whatever another's outcome; the first failure is
   * thrown once all have settled.
   */
  async bulkWrite<T extends Document>(
    operation: string,
    target: Collection<T>,
    ops: AnyBulkWriteOperation<T>[],
    options: { ordered?: boolean } = {},
  ): Promise<
    Pick<
      BulkWriteResult,
      'deletedCount' | 'matchedCount' | 'modifiedCount' | 'upsertedCount' | 'insertedCount'
    >
  > {
    const total = { deletedCount: 0, matchedCount: 0, modifiedCount: 0, upsertedCount: 0, insertedCount: 0 };
    const { budget } = this.limits;
    const unordered = options.ordered === false;
    const size = unordered ? budget.unordered.statements : budget.updatesPerCommand;
    const chunks: AnyBulkWriteOperation<T>[][] = [];
    for (let i = 0; i < ops.length; i += size) chunks.push(ops.slice(i, i + size));
    const send = async (chunk: AnyBulkWriteOperation<T>[]) => {
      const updates = chunk.filter(
        (op) => !('deleteOne' in op || 'deleteMany' in op || 'insertOne' in op),
      ).length;
      const res = await this.run(operation, updates + 1, () => target.bulkWrite(chunk, options), {
        read: false,
      });
      total.deletedCount += res.deletedCount;
      total.matchedCount += res.matchedCount;
      total.modifiedCount += res.modifiedCount;
      total.upsertedCount += res.upsertedCount;
      total.insertedCount += res.insertedCount;
    };
    if (!unordered) {
      for (const chunk of chunks) await send(chunk);
      return total;
    }
    let failure: { err: unknown } | undefined;
    await allWithin(chunks, budget.unordered.inFlight, (chunk) =>
      send(chunk).catch((err: unknown) => {
        failure ??= { err };
      }),
    );
    if (failure) throw failure.err;
    return total;
  }

  /**
   * A cursor read whole (`toArray`) is one command. A cursor read a batch at a time holds a
   * unit of the cursors' pool from its first batch to its close, because the server holds a
   * connection for it all that time; each batch is bounded by the timeout on its own.
   */
  cursor(operation: string, cursor: Cursor): Cursor {
    let held: (() => void) | undefined;
    let closed = false;
    /** The batch last asked for: past its deadline the server may still hold a connection for it. */
    let batch: Promise<unknown> = Promise.resolve();
    const letGo = () => {
      closed = true;
      const release = held;
      held = undefined;
      if (release) void batch.catch(() => undefined).finally(release);
    };
    cursor.once('close', letGo);
    const step = async <R>(next: () => Promise<R>): Promise<R> => {
      if (!held && !closed) {
        const { timeoutMs } = this.limits;
        held = await this.admit(this.admission.cursors, operation, 1, Date.now() + timeoutMs);
        if (closed) letGo();
      }
      const { timeoutMs } = this.limits;
      const asked = next();
      batch = asked;
      try {
        return await withinDeadline(asked, Date.now() + timeoutMs, operation, timeoutMs);
      } catch (err) {
        throw asUnavailable(operation, timeoutMs, err);
      }
    };
    const proxy: Cursor = new Proxy(cursor, {
      get: (target, prop) => {
        const value = Reflect.get(target, prop) as unknown;
        if (prop === 'toArray') {
          return () => this.toArray(operation, target);
        }
        if (prop === 'next' || prop === 'tryNext' || prop === 'hasNext') {
          return () => step(() => (value as () => Promise<unknown>).call(target));
        }
        if (prop === Symbol.asyncIterator) {
          return async function* () {
            try {
              for (;;) {
                const doc = await step(() => target.next());
                if (doc === null) return;
                yield doc;
              }
            } finally {
              await proxy.close();
            }
          };
        }
        if (prop === 'close') {
          return async () => {
            try {
              await target.close();
            } finally {
              letGo();
            }
          };
        }
        if (typeof value !== 'function') return value;
        // Builders (sort, limit, project, batchSize) return the cursor: keep returning the guarded one.
        return (...args: unknown[]) => {
          const out = (value as (...a: unknown[]) => unknown).apply(target, args);
          return out === target ? proxy : out;
        };
      },
    });
    return proxy;
  }
}

/** What `find` and `aggregate` return, as far as the guard uses it. */
interface Cursor {
  clone(): Cursor;
  toArray(): Promise<unknown[]>;
  next(): Promise<unknown>;
  close(): Promise<void>;
  once(event: 'close', listener: () => void): unknown;
}

/** The guard of one store: its collections wrapped, and any other call run through it. */
export function createGuard(uri: string, limits: StoreLimits): Pick<Guard, 'collection' | 'run'> {
  return new Guard(uri, limits);
}
