import { z } from 'zod';
import { MaintenanceRunSummary } from '../../model/maintenance.js';
import { listAll, type ObjectStore, PreconditionFailedError } from '../../store/object-store.js';
import { idOfJsonKey, MAINTENANCE_POLICIES_DIR, MAINTENANCE_RUNS_DIR } from '../catalog/layout.js';
import { encodeRecord, readRecord, type Versioned } from '../catalog/records.js';
import { parsePolicyProperties, setsPolicy } from './policy.js';

// Where the maintenance scheduler finds its work without listing the catalog.
//
// Policy markers: a table or namespace whose properties set a `maintenance.*` key gets a marker
// <root>/_catalog/maintenance/policies/<encoded target>.json, written before the properties are
// (so a stored policy always has a marker); a scheduler tick is one LIST of that folder, whatever
// the catalog holds. A marker is removed only by a tick that finds its target gone or without a
// policy, and only when the marker was last written more than a lease ago (re-read just before the
// delete): a set of a policy re-writes it, so only a set landing in the round trip between that
// re-read and the delete can lose its marker (until the next set of the policy); see docs/maintenance.md.
//
// Run slots: <root>/_catalog/maintenance/runs/<encoded table id>.json names the table's current run
// (a job id) and keeps the last runs' summaries. Invariant: at most one run of a table is unfinished
// at a time: a run is started only by a replace-if-unchanged (create-if-absent) of the slot read
// when the run it named was finished (terminal, or its record missing for more than a lease), so of
// two schedulers that read the same slot one wins; the job's own lease then picks its runner.

export interface PolicyTarget {
  kind: 'table' | 'namespace';
  id: string[];
}

const encodeTarget = (t: PolicyTarget): string => Buffer.from(JSON.stringify([t.kind, ...t.id])).toString('base64url');

function decodeTarget(encoded: string): PolicyTarget | null {
  try {
    const parsed: unknown = JSON.parse(Buffer.from(encoded, 'base64url').toString('utf8'));
    if (!Array.isArray(parsed) || !parsed.every((p) => typeof p === 'string')) return null;
    const [kind, ...id] = parsed as string[];
    return kind === 'table' || kind === 'namespace' ? { kind, id } : null;
  } catch {
    return null;
  }
}

export interface ListedPolicy {
  target: PolicyTarget;
  key: string;
  lastModified: Date;
}

export class PolicyMarkers {
  constructor(private readonly store: ObjectStore) {}

  private key(target: PolicyTarget): string {
    return `${MAINTENANCE_POLICIES_DIR}${encodeTarget(target)}.json`;
  }

  /** Marks the target when `properties` set a policy (call before writing them); nothing otherwise. */
  async note(target: PolicyTarget, properties: Record<string, string> | null | undefined): Promise<void> {
    if (!setsPolicy(properties)) return;
    await this.store.put(this.key(target), JSON.stringify({ kind: target.kind, id: target.id, noted_at: new Date().toISOString() }));
  }

  /** Every marked target: one LIST of the markers' folder. */
  async list(): Promise<ListedPolicy[]> {
    const listing = await listAll(this.store, MAINTENANCE_POLICIES_DIR, { delimiter: '/', details: true });
    const found: ListedPolicy[] = [];
    for (const o of listing.objects) {
      const encoded = idOfJsonKey(MAINTENANCE_POLICIES_DIR, o.key);
      const target = encoded === null ? null : decodeTarget(encoded);
      if (target) found.push({ target, key: o.key, lastModified: o.lastModified });
    }
    return found;
  }

  /** Removes a marker whose target has no policy, unless it was written within `quietMs` (see above). */
  async removeQuiet(key: string, quietMs: number): Promise<boolean> {
    const now = await this.store.head(key);
    if (!now || Date.now() - now.lastModified.getTime() <= quietMs) return false;
    await this.store.delete(key);
    return true;
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

export const RunSlot = z.object({
  job_id: z.string().nullable(),
  started_at: z.string().optional(),
  last_runs: z.array(RunSummary).default([]),
});
export type RunSlot = z.infer<typeof RunSlot>;

/** How many finished runs a slot keeps. */
export const KEPT_RUNS = 10;

export class RunSlots {
  constructor(private readonly store: ObjectStore) {}

  private key(table: string[]): string {
    return `${MAINTENANCE_RUNS_DIR}${encodeTarget({ kind: 'table', id: table })}.json`;
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

  /** Adds a finished run to the slot (newest first), re-reading on a lost race; the current run stays named until a new one is claimed. */
  async recordRun(table: string[], summary: RunSummary): Promise<void> {
    for (let attempt = 0; attempt < 10; attempt++) {
      const found = await this.read(table);
      const runs = [summary, ...(found?.value.last_runs ?? []).filter((r) => r.job_id !== summary.job_id)].slice(0, KEPT_RUNS);
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
  }
}
