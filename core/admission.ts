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
  /** What background work may hold of `commands` (WorkClass). */
  background: BackgroundLimits;
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

/**
 * Callers count as active this long after their last store command: a caller's think time
 * between calls is usually shorter, so background work stays low through it.
 */
const CALLERS_ACTIVE_FOR_MS = 1_000;

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
  const background = {
    // One command at a time while callers are active, however many units there are: each
    // holds a share of the server's cores until it ends, and the server's cores, not its
    // connections, decide how much a caller slows (docs/serving.md, Interactive before
    // background). A quarter kept free for callers otherwise.
    whileActive: 1,
    whileQuiet: commands - Math.max(1, Math.floor(commands / 4)),
    activeForMs: CALLERS_ACTIVE_FOR_MS,
  };
  return {
    perProcess,
    cursors,
    commands,
    background,
    updatesPerCommand,
    unordered: { statements, inFlight },
  };
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

/**
 * Whom a command serves: a caller waiting for its answer (a write's acknowledgement, a
 * recall), or work nobody waits on call by call (the night, embedding, erasing an agent, a
 * deep recall's walk of both tiers). Interactive commands go first, and while callers are
 * active background work holds few units, so a tenant's heavy work slows another's calls by
 * little more than the few commands it has running (docs/serving.md, Tenant against tenant, measured).
 */
export type WorkClass = 'interactive' | 'background';

/** How many units background work may hold: while callers are active, and while they are not. */
export interface BackgroundLimits {
  /**
   * While an interactive command runs, waits or ended less than `activeForMs` ago. A command
   * admitted holds the server's CPU until it ends, so a caller's commands compete with every
   * background command already running: few, so that a caller's latency stays near its idle
   * figure. While an interactive command runs, no background command starts at all, until
   * `capacity` interactive grants have passed the first waiting one.
   */
  whileActive: number;
  /** Otherwise: the night runs at the store's pace when nobody waits on it. */
  whileQuiet: number;
  /**
   * How long callers count as active after their last command: longer than the pauses between
   * one caller's calls, so background work does not fill the server in each pause.
   */
  activeForMs: number;
}

interface Waiter {
  units: number;
  grant: () => void;
}

/**
 * A counting semaphore of `capacity` units, granted first come first served within each
 * class, interactive before background: a command that needs many units is not overtaken for
 * ever by commands of its class that need one. Background commands start only while no
 * interactive one runs, and together hold at most what `BackgroundLimits` allow (any one may
 * hold more, alone); a background waiter is granted before interactive ones, and beside them,
 * once `capacity` of them have passed it: background work is slowed, never stopped.
 */
export class Admission {
  private free: number;
  private backgroundInUse = 0;
  private interactiveInUse = 0;
  private lastInteractiveAt = -Infinity;
  /** Interactive grants since the head of the background queue began to wait. */
  private passedBackground = 0;
  private quietTimer: NodeJS.Timeout | undefined;
  private readonly queues: Record<WorkClass, Waiter[]> = { interactive: [], background: [] };
  private readonly background: BackgroundLimits;

  constructor(
    readonly capacity: number,
    background?: BackgroundLimits,
  ) {
    this.free = capacity;
    this.background = background ?? { whileActive: capacity, whileQuiet: capacity, activeForMs: 0 };
  }

  /** Units in use now (metrics, tests). */
  get inUse(): number {
    return this.capacity - this.free;
  }

  /** Resolves with a release function once `units` are free, or rejects at `deadline` (epoch ms). */
  acquire(units: number, deadline: number, workClass: WorkClass = 'interactive'): Promise<() => void> {
    if (!Number.isInteger(units) || units < 1 || units > this.capacity) {
      return Promise.reject(new RangeError(`cannot admit ${units} of ${this.capacity} units`));
    }
    const started = Date.now();
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.free += units;
      if (workClass === 'background') this.backgroundInUse -= units;
      else {
        this.interactiveInUse -= units;
        this.lastInteractiveAt = Date.now();
      }
      this.drain();
    };
    const queue = this.queues[workClass];
    if (this.mayGoFirst(workClass) && this.fits(units, workClass)) {
      this.take(units, workClass);
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
          const at = queue.indexOf(waiter);
          if (at < 0) return;
          queue.splice(at, 1);
          if (workClass === 'background' && at === 0) this.passedBackground = 0;
          // The head may have been the one that held the others back.
          this.drain();
          reject(new AdmissionTimeout(Date.now() - started, units));
        },
        Math.max(0, deadline - Date.now()),
      );
      queue.push(waiter);
    });
  }

  private callersActive(): boolean {
    return (
      this.interactiveInUse > 0 ||
      this.queues.interactive.length > 0 ||
      Date.now() - this.lastInteractiveAt < this.background.activeForMs
    );
  }

  private fits(units: number, workClass: WorkClass): boolean {
    if (this.free < units) return false;
    if (workClass === 'interactive') return true;
    // Not beside a caller's running command: a background command started now would hold a
    // share of the server's cores for as long as the caller's ran (docs/serving.md, Not beside
    // a caller). Once passed by `capacity` grants it goes anyway: slowed, never stopped.
    if (this.interactiveInUse > 0 && this.passedBackground < this.capacity) return false;
    if (this.backgroundInUse === 0) return true;
    const limit = this.callersActive() ? this.background.whileActive : this.background.whileQuiet;
    return this.backgroundInUse + units <= limit;
  }

  private take(units: number, workClass: WorkClass): void {
    this.free -= units;
    if (workClass === 'background') {
      this.backgroundInUse += units;
      this.passedBackground = 0;
    } else {
      this.interactiveInUse += units;
      this.lastInteractiveAt = Date.now();
      if (this.queues.background.length > 0) this.passedBackground++;
    }
  }

  /** Whether a new request of this class may be granted before every waiter. */
  private mayGoFirst(workClass: WorkClass): boolean {
    const { interactive, background } = this.queues;
    if (workClass === 'background') return background.length === 0 && interactive.length === 0;
    return interactive.length === 0 && !(background.length > 0 && this.passedBackground >= this.capacity);
  }

  /** Whose waiter goes next: interactive, unless background has been passed long enough. */
  private nextClass(): WorkClass | undefined {
    const { interactive, background } = this.queues;
    if (background.length > 0 && (interactive.length === 0 || this.passedBackground >= this.capacity)) {
      return 'background';
    }
    return interactive.length > 0 ? 'interactive' : undefined;
  }

  private drain(): void {
    for (let next = this.nextClass(); next; next = this.nextClass()) {
      const head = this.queues[next][0]!;
      if (!this.fits(head.units, next)) {
        // Background waiting only for callers to go quiet: look again when they have.
        if (next === 'background' && this.free >= head.units && !this.quietTimer) {
          this.quietTimer = setTimeout(() => {
            this.quietTimer = undefined;
            this.drain();
          }, this.background.activeForMs);
          this.quietTimer.unref();
        }
        return;
      }
      this.queues[next].shift();
      this.take(head.units, next);
      head.grant();
    }
  }
}
