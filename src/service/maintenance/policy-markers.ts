import { createHash, randomBytes } from 'node:crypto';
import pLimit from 'p-limit';
import { z } from 'zod';
import { MaintenanceRunSummary } from '../../model/maintenance.js';
import { listAll, type ObjectStore, PreconditionFailedError } from '../../store/object-store.js';
import { idOfJsonKey, MAINTENANCE_POLICIES_DIR, MAINTENANCE_RUNS_DIR } from '../catalog/layout.js';
import { encodeRecord, readRecord, type Versioned } from '../catalog/records.js';
import { parsePolicyProperties, setsPolicy } from './policy.js';

// Where the maintenance scheduler finds its work without listing the catalog.
//
// Policy markers: a table or namespace whose properties set a `maintenance.*` key gets a marker
// <root>/_catalog/maintenance/policies/<digest of the target>.<token>.json holding the target, put
// before the properties are (so a stored policy always has a marker); a scheduler tick is one LIST
// of that folder, whatever the catalog holds (and a GET of each marker it has not read before).
// Every set of a policy puts a marker of its own (a new token), and a marker is never rewritten.
// Invariant: a policy that is stored has a marker no tick deletes. A tick deletes only markers it
// listed, of a target it then found gone or without a policy, and only those written more than a
// lease ago (a set's marker is put at most a lease before its properties); the marker of a set
// racing that tick is not among them. Of a target with a policy a tick keeps the newest listed
// marker and deletes the others.
//
// Run slots: <root>/_catalog/maintenance/runs/<digest of the table id>.json names the table's current run
// (a job id) and keeps the last runs' summaries. Invariant: at most one run of a table is unfinished
// at a time: a run is started only by a replace-if-unchanged (create-if-absent) of the slot read
// when the run it named was finished (terminal, or its record missing for more than a lease), so of
// two schedulers that read the same slot one wins; the job's own lease then picks its runner.

export interface PolicyTarget {
  kind: 'table' | 'namespace';
  id: string[];
}

/**
 * A fixed-length name for a target, whatever the length of its id (names of 249 bytes at each
 * level would not fit a file name otherwise): base64url of SHA-256 of the JSON of [kind, ...id].
 */
const digestOf = (t: PolicyTarget): string =>
  createHash('sha256')
    .update(JSON.stringify([t.kind, ...t.id]))
    .digest('base64url');

const PolicyMarker = z.object({ kind: z.enum(['table', 'namespace']), id: z.array(z.string()) });

/** `<digest>.<token>` of a marker's key, or null for a key that is not one. */
function markerName(key: string): { digest: string; token: string } | null {
  const name = idOfJsonKey(MAINTENANCE_POLICIES_DIR, key);
  const dot = name === null ? -1 : name.indexOf('.');
  return name === null || dot <= 0 ? null : { digest: name.slice(0, dot), token: name.slice(dot + 1) };
}

export interface ListedPolicy {
  target: PolicyTarget;
  /** The target's markers, newest first. */
  markers: Array<{ key: string; lastModified: Date }>;
}

/** Markers a tick reads at once (the first tick of a replica reads them all). */
const MARKER_READS = 16;

/** Markers read, by key (a marker is never rewritten): a tick GETs only the ones it has not seen. */
const KNOWN_MARKERS = 10_000;

export class PolicyMarkers {
  private readonly known = new Map<string, PolicyTarget>();

  constructor(private readonly store: ObjectStore) {}

  /** Marks the target when `properties` set a policy (call before writing them); nothing otherwise. */
  async note(target: PolicyTarget, properties: Record<string, string> | null | undefined): Promise<void> {
    if (!setsPolicy(properties)) return;
    const key = `${MAINTENANCE_POLICIES_DIR}${digestOf(target)}.${randomBytes(12).toString('base64url')}.json`;
    await this.store.put(key, JSON.stringify({ kind: target.kind, id: target.id, noted_at: new Date().toISOString() }));
  }

  /** Every marked target with its markers: one LIST of the markers' folder, and a GET of each marker not read before. */
  async list(): Promise<ListedPolicy[]> {
    const listing = await listAll(this.store, MAINTENANCE_POLICIES_DIR, { delimiter: '/', details: true });
    const byDigest = new Map<string, ListedPolicy>();
    const limit = pLimit(MARKER_READS);
    await Promise.all(
      listing.objects.map(async (o) => {
        const name = markerName(o.key);
        const target = name && (await limit(() => this.targetOf(o.key)));
        if (!name || !target) return;
        const listed = byDigest.get(name.digest) ?? { target, markers: [] };
        listed.markers.push({ key: o.key, lastModified: o.lastModified });
        byDigest.set(name.digest, listed);
      }),
    );
    for (const listed of byDigest.values()) listed.markers.sort((a, b) => b.lastModified.getTime() - a.lastModified.getTime());
    return [...byDigest.values()];
  }

  private async targetOf(key: string): Promise<PolicyTarget | null> {
    const known = this.known.get(key);
    if (known) return known;
    const record = await readRecord(this.store, key, PolicyMarker).catch(() => null);
    if (!record) return null; // gone since the LIST, or not a marker
    if (this.known.size >= KNOWN_MARKERS) this.known.clear();
    this.known.set(key, record.value);
    return record.value;
  }

  /** Deletes the listed markers of a target found without a policy that were written more than `quietMs` ago (see above). */
  async removeQuiet(listed: ListedPolicy, quietMs: number): Promise<void> {
    const before = Date.now() - quietMs;
    await Promise.all(listed.markers.filter((m) => m.lastModified.getTime() < before).map((m) => this.forget(m.key)));
  }

  /** Deletes every listed marker of a target with a policy but its newest. */
  async removeOlder(listed: ListedPolicy): Promise<void> {
    await Promise.all(listed.markers.slice(1).map((m) => this.forget(m.key)));
  }

  private async forget(key: string): Promise<void> {
    await this.store.delete(key);
    this.known.delete(key);
  }
}

/**
 * Where properties are set (a namespace's or table's create, declare or register, UpdateTable, a
 * rename's new name): checks their maintenance keys (a 400 code 13 naming the key, before anything
 * is written) and marks the target when they set a policy.
 */
export async function acceptPolicy(store: ObjectStore, target: PolicyTarget, properties: Record<string, string> | null | undefined): Promise<void> {
  parsePolicyProperties(properties);
  await new PolicyMarkers(store).note(target, properties);
}

/** What one finished run did, as its table's slot keeps it (and DescribeTable with_maintenance shows). */
export const RunSummary = MaintenanceRunSummary;
export type RunSummary = MaintenanceRunSummary;

/**
 * A finished run as the slot keeps it: its summary and the incarnation of the table it ran on, so
 * that a table dropped and created again under the name neither shows nor is scheduled by the runs
 * of the one before (runs recorded without it count as any incarnation's).
 */
const StoredRun = z.object({ ...MaintenanceRunSummary.shape, incarnation: z.string().nullable().optional() });
type StoredRun = z.infer<typeof StoredRun>;

export const RunSlot = z.object({
  job_id: z.string().nullable(),
  started_at: z.string().optional(),
  last_runs: z.array(StoredRun).default([]),
});
export type RunSlot = z.infer<typeof RunSlot>;

/** The slot's runs of the table of `incarnation` (incarnationOf its state), newest first, as summaries. */
export function runsOf(slot: RunSlot | undefined, incarnation: string | null): RunSummary[] {
  return (slot?.last_runs ?? []).filter((r) => r.incarnation === undefined || r.incarnation === incarnation).map(({ incarnation: _, ...run }) => run);
}

/** Replace-if-unchanged attempts of recording a run before giving up. */
const RECORD_ATTEMPTS = 10;

/** How many finished runs a slot keeps. */
export const KEPT_RUNS = 10;

export class RunSlots {
  constructor(private readonly store: ObjectStore) {}

  private key(table: string[]): string {
    return `${MAINTENANCE_RUNS_DIR}${digestOf({ kind: 'table', id: table })}.json`;
  }

  read(table: string[]): Promise<Versioned<RunSlot> | null> {
    return readRecord(this.store, this.key(table), RunSlot);
  }

  /** Names `jobId` as the table's current run: a replace-if-unchanged of `found` (create-if-absent when null); false when another scheduler won. */
  async claim(table: string[], found: Versioned<RunSlot> | null, jobId: string): Promise<boolean> {
    const next: RunSlot = { job_id: jobId, started_at: new Date().toISOString(), last_runs: found?.value.last_runs ?? [] };
    try {
      await this.store.put(this.key(table), encodeRecord(next), found ? { ifMatch: found.etag } : { ifNoneMatch: '*' });
      return true;
    } catch (e) {
      if (e instanceof PreconditionFailedError) return false;
      throw e;
    }
  }

  /**
   * Adds a finished run to the slot (newest first), re-reading on a lost race; the current run
   * stays named until a new one is claimed. Throws when every attempt lost (the caller logs it).
   */
  async recordRun(table: string[], summary: RunSummary, incarnation: string | null): Promise<void> {
    const stored: StoredRun = { ...summary, incarnation };
    for (let attempt = 0; attempt < RECORD_ATTEMPTS; attempt++) {
      const found = await this.read(table);
      const runs = [stored, ...(found?.value.last_runs ?? []).filter((r) => r.job_id !== summary.job_id)].slice(0, KEPT_RUNS);
      const next: RunSlot = {
        job_id: found?.value.job_id ?? summary.job_id,
        ...(found?.value.started_at ? { started_at: found.value.started_at } : {}),
        last_runs: runs,
      };
      try {
        await this.store.put(this.key(table), encodeRecord(next), found ? { ifMatch: found.etag } : { ifNoneMatch: '*' });
        return;
      } catch (e) {
        if (!(e instanceof PreconditionFailedError)) throw e;
      }
    }
    throw new Error(`the run slot of ${JSON.stringify(table)} changed at each of ${RECORD_ATTEMPTS} attempts to record run ${summary.job_id}`);
  }
}
