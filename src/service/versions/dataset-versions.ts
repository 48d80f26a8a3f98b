import pLimit from 'p-limit';
import { z } from 'zod';
import { type ManifestSummary, readManifestSummary } from '../../engine/lance-format/manifest.js';
import { type ManifestNamingScheme, parseManifestFileName } from '../../engine/lance-format/manifest-names.js';
import { invalidInput, NamespaceError } from '../../model/errors.js';
import { listAll, type ObjectInfo, PreconditionFailedError, type StoredObject } from '../../store/object-store.js';
import {
  LATEST_HINT,
  latestHintKey,
  manifestKey,
  reservationKey,
  reservationsDirKey,
  VERSIONS_DIR,
  versionSidecarKey,
  versionsDirKey,
} from '../catalog/layout.js';
import type { StoreDir } from '../catalog/locations.js';
import { encodeRecord, parseRecord, readRecord, type Versioned } from '../catalog/records.js';

// The versions of one Lance dataset as the store holds them: committed manifests under
// `_versions/` (V1 and V2 names), Lance's latest-version hint, and the service's sidecars under
// `_catalog/` in the dataset directory: version metadata and version-slot reservations. Whether,
// and under which name, a version is there is answered here only (get, readManifest, hasCommitted).

export interface CommittedVersion {
  version: number;
  scheme: ManifestNamingScheme;
  key: string;
  size: number;
  etag: string;
  lastModified: Date;
}

export const VersionSidecar = z.object({
  version: z.number().int().min(0),
  manifest_size: z.number().int().min(0).optional(),
  e_tag: z.string().optional(),
  metadata: z.record(z.string(), z.string()).optional(),
  naming_scheme: z.enum(['V1', 'V2']),
  committed_at: z.string(),
  transaction_id: z.string().optional(),
});
export type VersionSidecar = z.infer<typeof VersionSidecar>;

/** Who holds a version slot: a single create (no transaction) or a batch transaction. */
export const Reservation = z.object({
  transaction_id: z.string().optional(),
  created_at: z.string(),
  /** After this instant a holder that has not finished is presumed dead. */
  expires_at: z.string(),
});
export type Reservation = z.infer<typeof Reservation>;

/** Whether a version lies in one of the ranges [start, end) of a delete request (end -1: through the latest). */
export const inRanges = (version: number, ranges: Array<{ start_version: number; end_version: number }>): boolean =>
  ranges.some((r) => version >= r.start_version && (r.end_version === -1 || version < r.end_version));

/** Sidecars read at once. */
const SIDECAR_READS = 16;
const FIRST_PAGE = 100;

/** The version a hint file names; undefined for none, or one that cannot be read (a hint is never trusted further). */
function parseHint(hint: StoredObject | null): number | undefined {
  if (!hint) return undefined;
  try {
    const value: unknown = JSON.parse(hint.body.toString('utf8'));
    const version = typeof value === 'object' && value !== null ? (value as { version?: unknown }).version : undefined;
    return typeof version === 'number' && Number.isSafeInteger(version) && version >= 0 ? version : undefined;
  } catch {
    return undefined;
  }
}

/** The names a version may have, `preferred` first. */
const schemesFrom = (preferred: ManifestNamingScheme): ManifestNamingScheme[] => (preferred === 'V2' ? ['V2', 'V1'] : ['V1', 'V2']);

export class TableVersions {
  /** The version Lance's hint named when this handle last read it (undefined: not read, absent or unreadable). */
  private hintRead: number | undefined;

  /**
   * `dir`: the directory of the line of history (the dataset's own for main, a branch's tree);
   * `reservationsDir`: where its version slots are held (see branch-versions.ts), by default
   * the dataset's own.
   */
  constructor(
    readonly dir: StoreDir,
    private readonly reservationsDir: string = reservationsDirKey(dir.key),
  ) {}

  get store() {
    return this.dir.store;
  }

  get versionsPrefix(): string {
    return versionsDirKey(this.dir.key);
  }

  finalKey(version: number, scheme: ManifestNamingScheme): string {
    return manifestKey(this.dir.key, version, scheme);
  }

  sidecarKey(version: number): string {
    return versionSidecarKey(this.dir.key, version);
  }

  /** Where version-slot reservations live (a drop waits for the live ones, see table-fences.ts). */
  get reservationsPrefix(): string {
    return this.reservationsDir;
  }

  reservationKey(version: number): string {
    return reservationKey(this.reservationsDir, version);
  }

  private parse(info: ObjectInfo): CommittedVersion | null {
    const parsed = parseManifestFileName(info.key.slice(this.versionsPrefix.length));
    return parsed ? { ...parsed, key: info.key, size: info.size, etag: info.etag, lastModified: info.lastModified } : null;
  }

  /** Every committed version, ascending; a version present under both names counts once (V2). */
  async all(): Promise<CommittedVersion[]> {
    const listing = await listAll(this.store, this.versionsPrefix, { delimiter: '/', details: true });
    const byVersion = new Map<number, CommittedVersion>();
    for (const info of listing.objects) {
      const v = this.parse(info);
      if (v && byVersion.get(v.version)?.scheme !== 'V2') byVersion.set(v.version, v);
    }
    return [...byVersion.values()].sort((a, b) => a.version - b.version);
  }

  /** The committed manifest of one version under one naming scheme, or null. */
  async getNamed(version: number, scheme: ManifestNamingScheme): Promise<CommittedVersion | null> {
    const info = await this.store.head(this.finalKey(version, scheme));
    return info ? { version, scheme, key: info.key, size: info.size, etag: info.etag, lastModified: info.lastModified } : null;
  }

  /** The committed manifest of one version (looked for under the `preferred` name first), or null. */
  async get(version: number, preferred: ManifestNamingScheme = 'V2'): Promise<CommittedVersion | null> {
    for (const scheme of schemesFrom(preferred)) {
      const found = await this.getNamed(version, scheme);
      if (found) return found;
    }
    return null;
  }

  /** The summary of one version's manifest (read under the V2 name first), or null when the version does not exist. */
  async readManifest(version: number): Promise<ManifestSummary | null> {
    const file = await this.readManifestFile(version);
    return file ? readManifestSummary(file) : null;
  }

  /** The bytes of one version's manifest (read under the V2 name first), or null when the version does not exist. */
  async readManifestFile(version: number): Promise<Buffer | null> {
    for (const scheme of schemesFrom('V2')) {
      const object = await this.store.get(this.finalKey(version, scheme));
      if (object) return object.body;
    }
    return null;
  }

  /** Whether any version is committed (staged manifests do not count): a page of `_versions/` at a time, until one is found. */
  async hasCommitted(): Promise<boolean> {
    let startAfter: string | undefined;
    for (;;) {
      const page = await this.store.list(this.versionsPrefix, { delimiter: '/', maxKeys: 100, ...(startAfter ? { startAfter } : {}) });
      if (page.objects.some((o) => parseManifestFileName(o.key.slice(this.versionsPrefix.length)) !== null)) return true;
      if (!page.nextStartAfter) return false;
      startAfter = page.nextStartAfter;
    }
  }

  /**
   * Whether a version older than `version` (committed) is there: the one just before (one HEAD),
   * or, past a gap that a cleanup of old versions leaves, the next older V2 name (one short LIST
   * from it: V2 names sort newest first), or for V1 names the whole listing.
   */
  async hasOlderThan(version: number): Promise<boolean> {
    if (version <= 0) return false;
    if (await this.get(version - 1)) return true;
    const page = await this.store.list(this.versionsPrefix, { delimiter: '/', maxKeys: 10, startAfter: this.finalKey(version, 'V2') });
    if (page.objects.some((o) => (parseManifestFileName(o.key.slice(this.versionsPrefix.length))?.version ?? version) < version)) return true;
    return (await this.all()).some((v) => v.version < version);
  }

  /**
   * The latest committed version. On V2 tables one short LIST finds it (V2 names sort newest
   * first, and a V2 table never gets V1 names again), so the cost does not grow with the number of
   * versions. V1 tables start from Lance's hint file and the first page, and probe upward
   * exponentially (under both names: a V1 table may move to V2). Versions above any committed one are
   * contiguous (every commit is latest + 1), which is what makes probing upward exact. On a local
   * disk, where a LIST reads the whole directory, the hint and point lookups come first.
   */
  async latest(): Promise<CommittedVersion | null> {
    // Where a LIST reads the whole directory (a local disk), start from the hint and probe instead.
    let hint: { version: number | undefined } | undefined;
    if (this.store.listsWholeDirectory) {
      hint = { version: await this.hintedVersion() };
      const start = hint.version === undefined ? null : await this.get(hint.version);
      if (start) return this.probeUpward(start);
    }
    const page = await this.store.list(this.versionsPrefix, { delimiter: '/', maxKeys: FIRST_PAGE, details: true });
    let best: CommittedVersion | null = null;
    for (const info of page.objects) {
      const v = this.parse(info);
      if (v && (!best || v.version > best.version)) best = v;
    }
    if (!best || best.scheme === 'V1') {
      const hinted = hint ? hint.version : await this.hintedVersion();
      if (hinted !== undefined && (!best || hinted > best.version)) best = (await this.get(hinted, best?.scheme ?? 'V2')) ?? best;
    }
    if (!best && page.nextStartAfter) {
      const everything = await this.all();
      best = everything[everything.length - 1] ?? null;
    }
    if (!best) return null;
    // Every V2 name of a newer version sorts before this one, so it would be on this page; and a
    // V2 table never gets V1 names again (planVersion): nothing newer can exist.
    if (best.scheme === 'V2') return best;
    return this.probeUpward(best);
  }

  private async hintedVersion(): Promise<number | undefined> {
    this.hintRead = parseHint(await this.store.get(latestHintKey(this.dir.key)));
    return this.hintRead;
  }

  /**
   * Whether Lance's hint is worth placing for `version`, just committed: not when the hint this
   * handle read on its way (the latest version's lookup) named the version before. Lance's writers
   * place the hint themselves after each commit, so that is what their next commit finds; placing
   * it again would add a file to each of their commits, and on a local disk every file made between
   * two fsyncs makes them slower (that second hint file cost about a fifth of the service's CPU per
   * pylance append here, system time included). For a writer that does not keep it, the hint is
   * left at most one version behind (two more HEADs for the next lookup).
   */
  hintWanted(version: number): boolean {
    return this.hintRead !== version - 1;
  }

  private async probeUpward(known: CommittedVersion): Promise<CommittedVersion> {
    let best = known;
    let step = 1;
    // Exponential search for a missing version above `best`, then binary search below it.
    // Past a V2 version only V2 names can follow; past a V1 one, either (Lance's migration to V2).
    const at = (version: number) => (best.scheme === 'V2' ? this.getNamed(version, 'V2') : this.get(version, best.scheme));
    for (;;) {
      const next = await at(best.version + step);
      if (!next) break;
      best = next;
      step *= 2;
    }
    let low = best.version;
    let high = best.version + step; // missing
    while (high - low > 1) {
      const mid = Math.floor((low + high) / 2);
      const found = await at(mid);
      if (found) {
        best = found;
        low = mid;
      } else high = mid;
    }
    return best;
  }

  /**
   * Records the latest version for Lance readers; best effort, readers probe past a stale hint
   * (and take an unreadable one for none), so it need not survive a crash of the machine. A hint
   * never names a version before it is committed: it is written once the version is.
   */
  async writeHint(version: number): Promise<void> {
    await this.store.put(latestHintKey(this.dir.key), JSON.stringify({ version }), undefined, { durable: false, besideExisting: true }).catch(() => undefined);
  }

  async readSidecars(versions: number[]): Promise<Map<number, VersionSidecar>> {
    const found = new Map<number, VersionSidecar>();
    const read = async (v: number) => {
      // A malformed sidecar is as good as none; a store failure is a failure.
      const record = await readRecord(this.store, this.sidecarKey(v), VersionSidecar).catch((e: unknown) => {
        if (e instanceof NamespaceError) return null;
        throw e;
      });
      if (record) found.set(v, record.value);
    };
    // A limiter only where it limits: the commit path of every client reads one.
    const limit = versions.length > SIDECAR_READS ? pLimit(SIDECAR_READS) : (f: () => Promise<void>) => f();
    await Promise.all(versions.map((v) => limit(() => read(v))));
    return found;
  }

  /** `placeAfter`: see PutOptions (a sidecar placed before its manifest could describe another's). */
  async writeSidecar(sidecar: VersionSidecar, placeAfter?: Promise<unknown>): Promise<void> {
    await this.store.put(this.sidecarKey(sidecar.version), encodeRecord(sidecar), undefined, placeAfter ? { placeAfter } : undefined);
  }

  /**
   * Who holds a version slot, or null when it is free. A reservation that cannot be read was cut
   * short by a crash of the machine (a single writer's is not fsynced, see claim; on a local disk,
   * whose store rewrites a single writer's reservation file in place, such a crash may also leave
   * an earlier single writer's reservation, which holds the slot one lease at most): it reads as
   * one that expired long ago, held by no batch, so the next writer takes it over, from the etag
   * of what was read. (Not from a later HEAD: a local store rewrites a released reservation's file
   * for the next one, so a read that met the file as its key let go of it can fail to parse while
   * the key already holds a live reservation; see local-spare-files.ts.)
   */
  async readReservation(version: number): Promise<Versioned<Reservation> | null> {
    const object = await this.store.get(this.reservationKey(version));
    if (!object) return null;
    try {
      return parseRecord(object, Reservation);
    } catch (e) {
      if (!(e instanceof NamespaceError)) throw e;
      return { value: { created_at: '', expires_at: new Date(0).toISOString() }, etag: object.etag };
    }
  }

  /**
   * Claims a version slot; false when someone holds it. A single writer's reservation need not
   * survive a crash of the machine, which the writer does not survive either (its commit was not
   * acknowledged). A batch's must: after its commit point, recovery rolls it forward into the
   * slots it holds, and no single writer may take one of them first.
   */
  async claim(version: number, reservation: Reservation, replacing?: string): Promise<boolean> {
    try {
      await this.store.put(this.reservationKey(version), encodeRecord(reservation), replacing ? { ifMatch: replacing } : { ifNoneMatch: '*' }, {
        durable: reservation.transaction_id !== undefined,
        // Released soon, keeping the directory for the next slot's.
        shortLived: reservation.transaction_id === undefined,
      });
      return true;
    } catch (e) {
      if (e instanceof PreconditionFailedError) return false;
      throw e;
    }
  }

  /**
   * Deletes the staged file of a single commit that placed its manifest, before the slot's release
   * (which a drop waits for): that manifest is in `_versions/` then, so the directory stays.
   */
  async deleteStaged(key: string): Promise<void> {
    await this.store.delete(key, { keepDirectory: true });
  }

  async release(version: number): Promise<void> {
    // The next version's slot is claimed in the same directory soon.
    await this.store.delete(this.reservationKey(version), { keepDirectory: true });
  }

  /**
   * Resolves a client's staged manifest path to a key of this dataset's store. Clients send the
   * object_store form (local: absolute path without the leading '/'; S3: the key in the bucket);
   * absolute paths, file:// and s3:// URIs, and paths relative to the table are accepted too.
   *
   * Invariant: committing a version consumes (deletes) the staged file, so only a staging name is
   * accepted: a file directly under the dataset's `_versions/` that is not a committed manifest
   * (V1 or V2 name), not a detached or `_latest` manifest (any name ending `.manifest`) and not
   * Lance's hint. Lance writers stage `<final name>-<uuid>` there. Data files, indexes, the
   * service's records and committed manifests can never be named, so a create cannot destroy them.
   */
  stagedKey(manifestPath: string): string {
    const key = this.keyInside(manifestPath);
    if (!this.isStagingKey(key)) {
      throw invalidInput(
        `manifest_path ${JSON.stringify(manifestPath)} is not a staged manifest: stage it in the table's ${VERSIONS_DIR}/ directory under a name that is not a committed manifest's (Lance writers use ${VERSIONS_DIR}/<version>.manifest-<uuid>)`,
      );
    }
    return key;
  }

  /** Whether a key of this dataset's store is a staging name (see stagedKey). */
  isStagingKey(key: string): boolean {
    const name = key.startsWith(this.versionsPrefix) ? key.slice(this.versionsPrefix.length) : null;
    return name !== null && name !== '' && !name.includes('/') && name !== LATEST_HINT && !name.endsWith('.manifest') && parseManifestFileName(name) === null;
  }

  /**
   * The bytes of a staged manifest for `version`, or null when the staged file does not exist (a
   * retry after the commit consumed it). Bytes that are not a Lance manifest of that version are
   * a 400: committing them would make the table unreadable, or a version claim another's content.
   */
  async readStaged(key: string, version: number): Promise<StoredObject | null> {
    const staged = await this.store.get(key);
    if (!staged) return null;
    let found: number;
    try {
      found = readManifestSummary(staged.body).version;
    } catch (e) {
      throw invalidInput(`staged manifest ${JSON.stringify(this.manifestPath(key))} is not a Lance manifest: ${e instanceof Error ? e.message : String(e)}`);
    }
    if (found !== version)
      throw invalidInput(`staged manifest ${JSON.stringify(this.manifestPath(key))} is a manifest of version ${found}, not of version ${version}`);
    return staged;
  }

  /** A path a client sent, as a key inside this dataset's directory. */
  private keyInside(manifestPath: string): string {
    const dirPath = this.store.objectPath(this.dir.key);
    let path = manifestPath.trim();
    const s3 = /^s3a?:\/\/[^/]+\/(.*)$/i.exec(path);
    if (s3) path = s3[1] ?? '';
    else if (/^file:\/\//i.test(path)) path = decodeURIComponent(path.replace(/^file:\/\//i, ''));
    path = path.replace(/^\/+/, '');
    let relative: string | null = null;
    if (dirPath === '') relative = path;
    else if (path.startsWith(`${dirPath}/`)) relative = path.slice(dirPath.length + 1);
    else if (path.startsWith(`${VERSIONS_DIR}/`)) relative = path;
    const parts = relative?.split('/') ?? [];
    if (relative === null || relative === '' || parts.some((p) => p === '' || p === '.' || p === '..')) {
      throw invalidInput(`manifest_path ${JSON.stringify(manifestPath)} must lie inside the table's directory ${dirPath}`);
    }
    return `${this.dir.key}${relative}`;
  }

  /** The path clients read a committed manifest from (the same form they send staged paths in). */
  manifestPath(key: string): string {
    return this.store.objectPath(key);
  }
}
