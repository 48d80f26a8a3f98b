import path from 'node:path';
import { ErrorCode, invalidInput, NamespaceError } from '../../model/errors.js';
import { existingRealPath } from '../../store/local-file-io.js';
import { parseLocation, type StoreFactory, type StoreLocation } from '../../store/location.js';
import type { ObjectStore } from '../../store/object-store.js';
import { hasControlCharacter } from './layout.js';

/** A directory of a store: `key` is '' (the store root) or ends in '/'. */
export interface StoreDir {
  store: ObjectStore;
  key: string;
  /** True when the directory lies under the catalog root (the service owns what is there). */
  owned: boolean;
}

/**
 * The words Lance's reference server starts its refusals of a registered location with; clients
 * and Lance's own tests match them, so each refusal here starts with the one that applies.
 */
const REFUSED = {
  uri: 'Absolute URIs are not allowed',
  path: 'Absolute paths are not allowed',
  traversal: 'Path traversal is not allowed',
} as const;

// Resolves table locations: the catalog's own directories, and registered locations given as a
// path relative to the root, an absolute path, file://, or s3://. Stores for locations outside the
// root are made on demand by the factory app.ts gives (which knows the adapters and the S3
// connection) and kept for reuse.
//
// Only the catalog's own places are reached: a location is inside the root or under one of the
// configured allowed locations (none by default); anything else is a 400 before anything is
// opened. So is a local location inside the root reached through a symbolic link below the root,
// or holding one among its entries (`_versions/`, `data/`, ...: the engine and the service read,
// write and delete in them), wherever it leads (even to another place in the root: the namespace
// that holds a location, whose grants decide who may register it, is then the one its real path
// lies in, see linksOfDir), and one under an allowed location that a link, on its path or among
// its entries, takes out of it. Registered locations are resolved again by every request, so a
// link planted after the register is met too (LinkedLocation).

/** Whether two directories are the same one of the same store. */
export const sameDir = (a: StoreDir, b: StoreDir): boolean => a.store === b.store && a.key === b.key;

/**
 * The symbolic links that keep the catalog out of the directory `dirKey` of `store`: the first on
 * the way to it (the directory itself included), or else those among its entries; none on a store
 * without links (ObjectStore.linkOnPath, linksIn). One realpath and one read of the directory (a
 * stat when a listing kept it), both on the event loop: for a table's or a dataset's directory.
 */
export function linksOfDir(store: ObjectStore, dirKey: string): string[] {
  const onPath = store.linkOnPath?.(dirKey) ?? null;
  return onPath !== null ? [onPath] : (store.linksIn?.(dirKey) ?? []);
}

/** A location a symbolic link keeps the catalog out of (see Locations): a 400 where it is asked for; per request, a table registered there is none (a 404, see dataDir). */
export class LinkedLocation extends NamespaceError {
  constructor(location: string, why: string) {
    super(ErrorCode.InvalidInput, `location ${JSON.stringify(location)} ${why}, which the catalog never follows`);
  }
}
export class Locations {
  private readonly external = new Map<string, ObjectStore>();

  constructor(
    readonly root: ObjectStore,
    private readonly rootLocation: StoreLocation,
    private readonly storeAt: StoreFactory,
    private readonly allowed: StoreLocation[] = [],
  ) {}

  own(key: string): StoreDir {
    return { store: this.root, key, owned: true };
  }

  /**
   * Resolves a user-supplied location; a 400 for anything unusable. A relative location is taken
   * relative to `relativeTo` (a directory key under the root, '' or ending in '/'; default the root).
   */
  resolve(location: string, relativeTo = ''): StoreDir {
    const trimmed = location.trim();
    if (trimmed === '') throw invalidInput('location must not be empty');
    // No store or engine can name such a path; refused here rather than halfway through an operation.
    if (hasControlCharacter(trimmed)) throw invalidInput(`location ${JSON.stringify(location)} must not contain control characters`);
    const isUri = /^[a-z][a-z0-9+.-]*:\/\//i.test(trimmed);
    if (!isUri && !path.isAbsolute(trimmed)) {
      const parts = trimmed.replace(/\/+$/, '').split('/');
      if (parts.includes('..'))
        throw invalidInput(
          `${REFUSED.traversal}: location ${JSON.stringify(location)} has a ".." segment (a relative location lies below its namespace's directory)`,
        );
      if (parts.some((p) => p === '.' || p === '')) throw invalidInput(`location ${JSON.stringify(location)} must not have "." or empty segments`);
      return this.ownUnlinked(location, `${relativeTo}${parts.join('/')}/`);
    }
    // Lance's reference server refuses every absolute location; here one inside the catalog's places is accepted.
    const refused = isUri ? REFUSED.uri : REFUSED.path;
    const parsed = parseLocation(trimmed);
    if (!parsed) throw invalidInput(`${refused} except file:// and s3://bucket/prefix ones without "." or ".." segments: location ${JSON.stringify(location)}`);
    const inside = this.keyInsideRoot(parsed);
    if (inside !== null) return this.ownUnlinked(location, inside);
    const place = this.allowed.find((a) => isUnder(parsed, a));
    if (!place) {
      throw invalidInput(
        `${refused} outside the catalog root and every allowed location: location ${JSON.stringify(location)} (see allowed locations in the README)`,
      );
    }
    const store = this.externalStore(parsed);
    if (parsed.kind === 'local' && place.kind === 'local') this.refuseLinksOut(location, parsed.dir, place.dir, store);
    return { store, key: '', owned: false };
  }

  /** The root's directory `key`; a LinkedLocation when a symbolic link below the root is on its path or among its entries. */
  private ownUnlinked(location: string, key: string): StoreDir {
    const [link] = linksOfDir(this.root, key);
    if (link !== undefined) {
      const why =
        link.length > key.length
          ? `holds a symbolic link below the catalog root (its entry ${JSON.stringify(link.slice(key.length, -1))})`
          : 'is reached through a symbolic link below the catalog root';
      throw new LinkedLocation(location, why);
    }
    return this.own(key);
  }

  /**
   * A LinkedLocation when `dir`, or the nearest of its ancestors that exists, resolves (through
   * symbolic links) to a place outside `base`, or when an entry of `dir` (the root of `store`) is
   * a link that leads out of it or nowhere.
   */
  private refuseLinksOut(location: string, dir: string, base: string, store: ObjectStore): void {
    const realBase = existingRealPath(base);
    if (realBase === null) return; // no base yet: nothing under it leads anywhere
    const outside = (target: string | null) => {
      const rel = target === null ? '..' : path.relative(realBase, target);
      return rel.startsWith('..') || path.isAbsolute(rel);
    };
    for (let probe = dir; ; probe = path.dirname(probe)) {
      const target = existingRealPath(probe);
      if (target !== null) {
        if (outside(target)) throw new LinkedLocation(location, "leads out of the catalog's places through a symbolic link");
        break;
      }
      if (path.dirname(probe) === probe) return;
    }
    for (const link of store.linksIn?.('') ?? []) {
      const entry = link.slice(0, -1);
      if (outside(existingRealPath(path.join(dir, entry)))) {
        throw new LinkedLocation(location, `holds a symbolic link (its entry ${JSON.stringify(entry)}) that leads out of the catalog's places`);
      }
    }
  }

  /** Key of a location under the root ('' for the root itself, else ending in '/'), or null. */
  private keyInsideRoot(loc: StoreLocation): string | null {
    const root = this.rootLocation;
    if (loc.kind === 'local' && root.kind === 'local') {
      const rel = path.relative(root.dir, loc.dir);
      if (rel === '') return '';
      if (rel.startsWith('..') || path.isAbsolute(rel)) return null;
      return `${rel.split(path.sep).join('/')}/`;
    }
    if (loc.kind === 's3' && root.kind === 's3' && loc.bucket === root.bucket) {
      if (root.prefix === '') return loc.prefix === '' ? '' : `${loc.prefix}/`;
      if (loc.prefix === root.prefix) return '';
      if (loc.prefix.startsWith(`${root.prefix}/`)) return `${loc.prefix.slice(root.prefix.length + 1)}/`;
    }
    return null;
  }

  private externalStore(loc: StoreLocation): ObjectStore {
    const id = loc.kind === 'local' ? `file:${loc.dir}` : `s3:${loc.bucket}/${loc.prefix}`;
    let store = this.external.get(id);
    if (!store) {
      store = this.storeAt(loc);
      this.external.set(id, store);
    }
    return store;
  }

  async close(): Promise<void> {
    await Promise.all([...this.external.values()].map((s) => s.close()));
    this.external.clear();
  }
}

/** Whether `loc` is `place` or lies under it (same kind, same bucket, a path or prefix below). */
function isUnder(loc: StoreLocation, place: StoreLocation): boolean {
  if (loc.kind === 'local' && place.kind === 'local') {
    const rel = path.relative(place.dir, loc.dir);
    return !rel.startsWith('..') && !path.isAbsolute(rel);
  }
  if (loc.kind === 's3' && place.kind === 's3') {
    return loc.bucket === place.bucket && (place.prefix === '' || loc.prefix === place.prefix || loc.prefix.startsWith(`${place.prefix}/`));
  }
  return false;
}
