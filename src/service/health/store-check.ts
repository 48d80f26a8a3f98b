import { randomUUID } from 'node:crypto';
import { type ObjectInfo, type ObjectStore, PreconditionFailedError } from '../../store/object-store.js';
import { storeCheckKey } from '../catalog/layout.js';
import type { ServiceLogger } from '../context/logger.js';

// Whether the store keeps its word on conditional writes. Every race the service settles is
// settled by a create-if-absent (If-None-Match: *) or a replace-if-unchanged (If-Match) put, so on
// a store that ignores them (some S3-compatible stores have: Lance's own history has one that
// overwrote on If-None-Match) every race silently loses acknowledged writes. The probe asks the
// store, on a throwaway key, to break each condition once, in 6 requests one after the other:
//   1. create-if-absent of the new key: must succeed;
//   2. create-if-absent of it again: must fail (precondition failed);
//   3. replace with its current etag: must succeed;
//   4. replace with the etag of 1, stale since: must fail;
//   5. read it: it must hold what 3 wrote (else a refused write landed anyway);
//   6. delete it, whatever happened.
// The key is unique to the process and the probe (`_catalog/store-check/<process>-<n>`), so
// replicas probing at once never meet. A probe that fails for another reason (the store
// unreachable, read-only or full) says nothing of the store's word: it is inconclusive, never
// "does not honour". The probe shows that each condition is honoured, not that racing writers are
// settled atomically: no cheap probe can show that (test/http/races.test.ts does, for the stores
// the tests run on).

export type StoreCheckResult =
  | { kind: 'honoured' }
  /** `broken`: what the store did not honour, one phrase each. */
  | { kind: 'broken'; broken: string[] }
  | { kind: 'inconclusive'; cause: unknown };

export interface StoreCheckOptions {
  /** Time between probes after the one at start-up; 0: none. */
  intervalMs: number;
  /** Serve a store that does not honour conditional writes, with a warning at each probe that finds it so. */
  allowUnsafe: boolean;
}

/** The store does not honour conditional writes and nothing allows serving it: the service must not start. */
export class UnsafeStoreError extends Error {
  constructor(
    readonly root: string,
    readonly broken: string[],
  ) {
    super(
      `refusing to serve the store ${root}: it does not honour conditional writes (${broken.join('; ')}), so concurrent writers would silently lose acknowledged writes; ` +
        'use a store that honours If-None-Match and If-Match, or pass --allow-unsafe-store (LANCE_NS_ALLOW_UNSAFE_STORE=true) to serve it anyway',
    );
    this.name = 'UnsafeStoreError';
  }
}

const probeBody = (step: number) => `store check step ${step}`;

/** Resolves to the put's object, or to null when its condition did not hold; any other failure rejects. */
const landed = (put: Promise<ObjectInfo>): Promise<ObjectInfo | null> =>
  put.catch((e: unknown) => {
    if (e instanceof PreconditionFailedError) return null;
    throw e;
  });

/**
 * Checks the store at start-up and then every `intervalMs`. At start-up a store that does not
 * honour conditional writes stops the service (UnsafeStoreError) unless `allowUnsafe`; found so
 * later, the replica is no longer ready, for good: writes since the last probe may have been lost
 * and an operator must look before it serves again (a restart probes again). A store that could
 * not be checked (inconclusive) leaves the replica not ready until a probe succeeds: readiness
 * probes it again each time it is asked.
 */
export class StoreCheck {
  private readonly processId = randomUUID();
  private probes = 0;
  private state: 'unchecked' | 'honoured' | 'broken' = 'unchecked';
  private running: Promise<StoreCheckResult> | null = null;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: ObjectStore,
    private readonly options: StoreCheckOptions,
    private readonly logger: ServiceLogger,
  ) {}

  /** The probe at start-up: rejects with UnsafeStoreError when the store does not honour conditional writes and nothing allows it. */
  async atStart(): Promise<void> {
    if (this.options.allowUnsafe) {
      this.logger.warn(
        { root: this.store.rootUri },
        '--allow-unsafe-store is set: a store that does not honour conditional writes will be served, and concurrent writers may silently lose acknowledged writes',
      );
    }
    const started = performance.now();
    const result = await this.check(true);
    if (result.kind === 'broken' && !this.options.allowUnsafe) throw new UnsafeStoreError(this.store.rootUri, result.broken);
    if (result.kind === 'honoured')
      this.logger.info({ root: this.store.rootUri, ms: Math.round(performance.now() - started) }, 'the store honours conditional writes');
  }

  /** Probes every `intervalMs` from now on (none when 0). */
  start(): void {
    if (this.options.intervalMs <= 0) return;
    this.timer = setInterval(() => void this.check(), this.options.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  /** Null when the store may be served; else why not (no internals: this reaches the readiness answer). */
  async unready(): Promise<string | null> {
    if (this.options.allowUnsafe) return null;
    if (this.state === 'unchecked') await this.check();
    if (this.state === 'broken') return 'the store does not honour conditional writes';
    if (this.state === 'unchecked') return 'the store could not be checked for conditional writes yet';
    return null;
  }

  /** One probe (joined by whoever asks while it runs), noted; a broken store's state never goes back. */
  private check(starting = false): Promise<StoreCheckResult> {
    this.running ??= this.probe()
      .then((result) => {
        this.note(result, starting);
        return result;
      })
      .finally(() => {
        this.running = null;
      });
    return this.running;
  }

  /** Notes and logs a probe's result; `starting`: the start-up probe, whose refusal to serve is the caller's to tell. */
  private note(result: StoreCheckResult, starting: boolean): void {
    const root = this.store.rootUri;
    if (result.kind === 'inconclusive') {
      this.logger.warn(
        { root, err: result.cause },
        'could not check that the store honours conditional writes: the probe failed for another reason (unreachable, read-only, full?)',
      );
      return;
    }
    if (result.kind === 'honoured') {
      if (this.state === 'unchecked') this.state = 'honoured';
      if (this.state === 'broken')
        this.logger.error({ root }, 'the store honours conditional writes again, but did not before: this replica stays not ready until it is restarted');
      return;
    }
    const message = `the store ${root} does not honour conditional writes (${result.broken.join('; ')}): concurrent writers may silently lose acknowledged writes`;
    if (this.options.allowUnsafe) {
      this.logger.warn({ root, notHonoured: result.broken }, `${message}; serving it anyway (--allow-unsafe-store)`);
    } else {
      this.state = 'broken';
      if (!starting)
        this.logger.error({ root, notHonoured: result.broken }, `${message}; this replica is not ready from now on (restart it once the store is fixed)`);
    }
  }

  /** One probe on a key of its own (see above); the key is deleted whatever happened. */
  private async probe(): Promise<StoreCheckResult> {
    const key = storeCheckKey(this.processId, ++this.probes);
    try {
      return await probeOn(this.store, key);
    } catch (e) {
      return { kind: 'inconclusive', cause: e };
    } finally {
      await this.store.delete(key).catch((e: unknown) => this.logger.warn({ key, err: e }, 'could not delete the key of a store check'));
    }
  }
}

/** Steps 1 to 5 of a probe (see above) on a key that does not exist; rejects on any failure but a lost condition. */
async function probeOn(store: ObjectStore, key: string): Promise<StoreCheckResult> {
  const first = await landed(store.put(key, probeBody(1), { ifNoneMatch: '*' }));
  if (!first) return { kind: 'broken', broken: ['a create-if-absent (If-None-Match: *) of a new key was refused'] };
  const broken: string[] = [];
  const second = await landed(store.put(key, probeBody(2), { ifNoneMatch: '*' }));
  if (second) broken.push('a create-if-absent (If-None-Match: *) of an existing key replaced it');
  if (!(await landed(store.put(key, probeBody(3), { ifMatch: (second ?? first).etag })))) {
    broken.push('a replace-if-unchanged (If-Match) with the current etag was refused');
    await store.put(key, probeBody(3));
  }
  // Every write makes a new etag (the bodies differ), so the first one's is stale now.
  if (await landed(store.put(key, probeBody(4), { ifMatch: first.etag })))
    broken.push('a replace-if-unchanged (If-Match) with a stale etag replaced the object');
  else if ((await store.get(key))?.body.toString('utf8') !== probeBody(3)) broken.push('a conditional write it refused changed the object anyway');
  return broken.length > 0 ? { kind: 'broken', broken } : { kind: 'honoured' };
}
