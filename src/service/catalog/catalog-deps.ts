import type { LanceEngine } from '../../engine/lance-engine.js';
import type { Metrics } from '../../metrics/metrics.js';
import type { ObjectStore } from '../../store/object-store.js';
import type { TableCredentials } from '../tables/credential-vending.js';
import { TableFences } from '../tables/table-fences.js';
import { ListingIndex } from './listing-index.js';
import type { Locations } from './locations.js';
import type { PageTokens } from './page-token.js';

/** Everything the catalog services run on: built once per process (app.ts, by catalogDeps) and handed to every service. */
export interface CatalogDeps {
  store: ObjectStore;
  engine: LanceEngine;
  locations: Locations;
  pageTokens: PageTokens;
  settings: CatalogSettings;
  /** The storage options of responses about a table, vended credentials included (see tables/credential-vending.ts). */
  credentials: TableCredentials;
  /** Where the services report commits, retries, vends and jobs (src/metrics/metrics.ts). */
  metrics: Metrics;
  /** Where writes to a table and its drop meet (tables/table-fences.ts): the one every service writes and drops through. */
  fences: TableFences;
  /** The listing index of every namespace (listing-index.ts), with the process's one cache of its snapshots. */
  listingIndex: ListingIndex;
}

export interface CatalogSettings {
  /** Managed versioning for tables whose own property and namespaces leave it unset. */
  managedVersioningDefault: boolean;
  /** How long a claim, a write or a drop is trusted without a renewal before its holder is presumed dead. */
  leaseMs: number;
}

/** The catalog's deps over `parts`, with the helpers the services share built from them (once: call it once per process). */
export function catalogDeps(parts: Omit<CatalogDeps, 'fences' | 'listingIndex'>): CatalogDeps {
  const { store, locations, settings } = parts;
  return { ...parts, fences: new TableFences(store, settings.leaseMs), listingIndex: new ListingIndex(store, locations, settings.leaseMs) };
}
