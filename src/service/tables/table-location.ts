import type { DatasetLocation } from '../../engine/lance-engine.js';
import { invalidInput } from '../../model/errors.js';
import type { Locations, StoreDir } from '../catalog/locations.js';

// Where a table's dataset lives, as the engine reaches it and as a client may ask for it.

/**
 * Storage options a client may pass for its write: timeouts and retries of the engine's own
 * connection. Every other key is ignored, whatever it is: nothing a client sends changes where the
 * engine connects, with which credentials, or how safely (endpoints, regions, keys, tokens,
 * proxies, plain HTTP, certificate checks); a client could otherwise send the service's signed
 * requests wherever it likes. Ignored rather than refused, because clients pass on their own
 * connection's options as a matter of course.
 */
export const CLIENT_STORAGE_OPTIONS: ReadonlySet<string> = new Set([
  'timeout',
  'connect_timeout',
  'pool_idle_timeout',
  'pool_max_idle_per_host',
  'client_max_retries',
  'client_retry_timeout',
  'download_retry_count',
]);

/** The entries of `options` a client may set (CLIENT_STORAGE_OPTIONS). */
export function clientStorageOptions(options: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(options).filter(([key]) => CLIENT_STORAGE_OPTIONS.has(key.toLowerCase())));
}

/** The engine's view of `dir`, with the options a client may add to its write (clientStorageOptions); never over the store's own. */
export function datasetAt(dir: StoreDir, clientOptions: Record<string, string> = {}): DatasetLocation {
  return { location: dir.store.location(dir.key), storageOptions: { ...clientStorageOptions(clientOptions), ...dir.store.engineStorageOptions() } };
}

/**
 * A 400 for a location the client asked for (DeclareTable's body, CreateTable's query) that is
 * not `dir`, where the table lives or will: the service decides where tables live, and an
 * answer naming another place than the one asked for would send the client's data elsewhere.
 */
export function refuseOtherLocation(locations: Locations, asked: string | null | undefined, dir: StoreDir | null, why: string): void {
  if (asked === undefined || asked === null || asked.trim() === '') return;
  const resolved = locations.resolve(asked);
  if (dir === null) throw invalidInput(`location ${JSON.stringify(asked)} cannot be asked for: the name's directory holds a deregistered table's data; ${why}`);
  const location = dir.store.location(dir.key);
  if (resolved.store.location(resolved.key) !== location)
    throw invalidInput(`location ${JSON.stringify(asked)} differs from the table's location ${location}; ${why}`);
}
