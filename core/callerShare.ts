/**
 * One caller's share of a serving process (server/http.ts): at most `running` of its calls
 * answered at once and at most `queued` more waiting, granted in the order they came; past
 * both, a call is refused. A caller flooding from many connections waits on them instead of
 * being refused at once, since a refusal that costs nothing comes straight back and the flood
 * then costs the server its whole rate of refusals (docs/serving.md).
 */
export class CallerShare {
  private running = 0;
  private readonly waiting: Place[] = [];

  constructor(
    private readonly maxRunning: number,
    private readonly maxQueued: number,
  ) {}

  /** A place, granted now or once the places ahead of it leave; or refused. */
  take(): Place | 'refused' {
    if (this.running < this.maxRunning) {
      this.running++;
      return new Place(true);
    }
    if (this.waiting.length >= this.maxQueued) return 'refused';
    const place = new Place(false);
    this.waiting.push(place);
    return place;
  }

  /**
   * A call is done, or gone while it waited. A running call's place passes to the first in
   * line, which keeps the count running; a waiting one just leaves the line.
   */
  leave(place: Place): void {
    if (!place.isGranted) {
      const at = this.waiting.indexOf(place);
      if (at >= 0) this.waiting.splice(at, 1);
      return;
    }
    const next = this.waiting.shift();
    if (next) next.grant();
    else this.running--;
  }

  /** No call running or waiting: the share can be forgotten. */
  get idle(): boolean {
    return this.running === 0 && this.waiting.length === 0;
  }

  get counts(): { running: number; waiting: number } {
    return { running: this.running, waiting: this.waiting.length };
  }
}

export class Place {
  /** Settles once the place is granted. */
  readonly granted: Promise<void>;
  private resolve!: () => void;

  constructor(private grantedNow: boolean) {
    this.granted = grantedNow ? Promise.resolve() : new Promise((resolve) => (this.resolve = resolve));
  }

  get isGranted(): boolean {
    return this.grantedNow;
  }

  grant(): void {
    this.grantedNow = true;
    this.resolve();
  }
}
