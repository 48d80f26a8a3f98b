import { listAll, type ObjectStore, PreconditionFailedError } from '../../store/object-store.js';
import { idOfJsonKey, markerKey } from '../catalog/layout.js';

// Markers of unfinished work: one small object per unfinished job or batch under a prefix of
// `_catalog/`, so that the pollers every replica runs find what to finish with one LIST of the
// unfinished ones instead of a scan of every transaction record ever written.
//
// Invariant: a marker is written before the work claims anything and removed only once nothing
// of it is left to finish, so unfinished work always has a marker. A marker whose record never
// appeared (its writer died between the two) is removed by a poller once it is older than a lease.

export interface Marker {
  id: string;
  key: string;
  lastModified: Date;
}

export class UnfinishedMarkers {
  constructor(
    private readonly store: ObjectStore,
    /** Ends in '/': one of layout.ts's marker folders. */
    private readonly prefix: string,
  ) {}

  key(id: string): string {
    return markerKey(this.prefix, id);
  }

  /** Writes the marker of `id`; one already there is fine (an adopted or repeated mark). */
  async add(id: string): Promise<void> {
    await this.store.put(this.key(id), JSON.stringify({ id, created_at: new Date().toISOString() }), { ifNoneMatch: '*' }).catch((e: unknown) => {
      if (!(e instanceof PreconditionFailedError)) throw e;
    });
  }

  async remove(id: string): Promise<void> {
    await this.store.delete(this.key(id));
  }

  async list(): Promise<Marker[]> {
    const listing = await listAll(this.store, this.prefix, { delimiter: '/', details: true });
    const markers: Marker[] = [];
    for (const o of listing.objects) {
      const id = idOfJsonKey(this.prefix, o.key);
      if (id !== null) markers.push({ id, key: o.key, lastModified: o.lastModified });
    }
    return markers;
  }
}

/** How often a poller looks for unfinished work: half the lease, within 100 ms .. 5 s. */
export const pollIntervalMs = (leaseMs: number): number => Math.min(5000, Math.max(100, Math.floor(leaseMs / 2)));

/** Runs `poll` now and then every `everyMs` until stopped; never two rounds at once. */
export class Poller {
  private timer: NodeJS.Timeout | undefined;
  private round: Promise<void> = Promise.resolve();
  private busy = false;

  constructor(
    private readonly poll: () => Promise<void>,
    private readonly everyMs: number,
  ) {}

  start(): void {
    this.tick();
    this.timer = setInterval(() => this.tick(), this.everyMs);
    this.timer.unref();
  }

  /** Stops polling; resolves once a round in progress has ended. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.round;
  }

  private tick(): void {
    if (this.busy) return;
    this.busy = true;
    this.round = this.poll()
      .catch(() => undefined)
      .finally(() => {
        this.busy = false;
      });
  }
}
