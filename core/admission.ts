/**
 * How many store commands a process may have in flight, so that the commands of every
 * process of a deployment together can never need more of the store server's connections
 * than it has (docs/invariants.md, No store wedge).
 *
 * FerretDB on PostgreSQL serves each command from a bounded pool of PostgreSQL connections,
 * and some commands hold one connection while they wait for another (an `update` holds its
 * query's connection while it opens the transaction that writes). When every connection is
 * held by a command waiting for one more, no command ever finishes. Each command therefore
 * holds, before it is sent, as many units of its process's budget as the connections it can
 * hold at once at the server (`weight`), and the budgets of all processes add up to at most
 * the server's connections. A command that has its units can always get its connections, so
 * the wait for a connection ends.
 */

/** The deployment's store connections, and how many processes share them. */
export interface StoreShare {
  /** Connections the store server gives memgate in all (FerretDB's pool). */
  connections: number;
  /** The most memgate processes of one deployment that use the store at once. */
  processes: number;
}

export interface ConnectionBudget {
  /** This process's share of the server's connections: `connections / processes`, rounded down. */
  perProcess: number;
  /**
   * Units for cursors read a batch at a time, held from the first batch to the close: the
   * server keeps a connection for an open cursor while its reader does other work, which may
   * itself wait for units of `commands`.
   */
  cursors: number;
  /** Units for every other command, for the length of one command (or one cursor read whole). */
  commands: number;
  /**
   * Statements per `update` command: one connection for each statement's query (held until
   * the command ends) and one for its write, so at most `commands - 1`.
   */
  updatesPerCommand: number;
  /**
   * An unordered bulk write (its statements independent of one another) is sent as commands
   * of at most `statements` statements, `inFlight` of them at once: the server runs a
   * command's statements one after another, each its own transaction, so independent
   * statements finish sooner side by side than in one command. Together they hold at most
   * `inFlight × (statements + 1)` units, no more than the commands may.
   */
  unordered: { statements: number; inFlight: number };
}

/** More statements per command saves round trips but not work; 16 amortises the trip. */
const MAX_UPDATES_PER_COMMAND = 16;

/**
 * Commands of one unordered bulk write in flight at once, at most: enough to keep a server's
 * transactions overlapping, few enough to leave other callers room in the queue.
 */
const UNORDERED_IN_FLIGHT = 8;

/** The least budget with room for a cursor and a one-statement update beside it. */
export const MIN_CONNECTIONS_PER_PROCESS = 3;

export function connectionBudget(share: StoreShare): ConnectionBudget {
  const perProcess = Math.floor(share.connections / share.processes);
  if (perProcess < MIN_CONNECTIONS_PER_PROCESS) {
    throw new RangeError(
      `${share.connections} connections for ${share.processes} processes leave ${perProcess} a process; at least ${MIN_CONNECTIONS_PER_PROCESS} are needed`,
    );
  }
  // A fifth for cursors read a batch at a time (loading an index, a night's pages), the rest
  // for commands: there are few such cursors, and many point reads and writes.
  const cursors = Math.max(1, Math.floor(perProcess / 5));
  const commands = perProcess - cursors;
  const updatesPerCommand = Math.min(MAX_UPDATES_PER_COMMAND, commands - 1);
  // One bulk write's commands in flight hold at most half the commands' units (a
  // one-statement update needs two), the rest left to other callers.
  const half = Math.floor(commands / 2);
  const inFlight = Math.min(UNORDERED_IN_FLIGHT, Math.max(1, Math.floor(half / 2)));
  const statements = Math.max(1, Math.min(updatesPerCommand, Math.floor(half / inFlight) - 1));
  return { perProcess, cursors, commands, updatesPerCommand, unordered: { statements, inFlight } };
}

/** Admission refused: the units were not free before the deadline. */
export class AdmissionTimeout extends Error {
  constructor(
    readonly waitedMs: number,
    readonly units: number,
  ) {
    super(`no ${units} store connection unit(s) free within ${waitedMs} ms`);
  }
}

interface Waiter {
  units: number;
  grant: () => void;
}

/**
 * A counting semaphore of `capacity` units, granted first come first served: a command that
 * needs many units is not overtaken for ever by commands that need one.
 */
export class Admission {
  private free: number;
  private readonly queue: Waiter[] = [];

  constructor(readonly capacity: number) {
    this.free = capacity;
  }

  /** Units in use now (metrics, tests). */
  get inUse(): number {
    return this.capacity - this.free;
  }

  /** Resolves with a release function once `units` are free, or rejects at `deadline` (epoch ms). */
  acquire(units: number, deadline: number): Promise<() => void> {
    if (!Number.isInteger(units) || units < 1 || units > this.capacity) {
      return Promise.reject(new RangeError(`cannot admit ${units} of ${this.capacity} units`));
    }
    const started = Date.now();
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.free += units;
      this.drain();
    };
    if (this.queue.length === 0 && this.free >= units) {
      this.free -= units;
      return Promise.resolve(release);
    }
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        units,
        grant: () => {
          clearTimeout(timer);
          resolve(release);
        },
      };
      const timer = setTimeout(
        () => {
          const at = this.queue.indexOf(waiter);
          if (at < 0) return;
          this.queue.splice(at, 1);
          // The head may have been the one that held the others back.
          this.drain();
          reject(new AdmissionTimeout(Date.now() - started, units));
        },
        Math.max(0, deadline - Date.now()),
      );
      this.queue.push(waiter);
    });
  }

  private drain(): void {
    while (this.queue.length > 0 && this.free >= this.queue[0]!.units) {
      const next = this.queue.shift()!;
      this.free -= next.units;
      next.grant();
    }
  }
}
