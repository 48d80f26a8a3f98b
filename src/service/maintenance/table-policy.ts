import type { ObjectStore } from '../../store/object-store.js';
import { readNamespace } from '../catalog/catalog.js';
import { tableRecordKey, tableRefOf } from '../catalog/layout.js';
import { readRecord, TableRecord } from '../catalog/records.js';
import { effectivePolicy, type MaintenancePolicy } from './policy.js';

/** Namespaces' properties read during one scheduler tick, by id, so that each is read once. */
export type NamespaceProperties = Map<string, Promise<Record<string, string>>>;

function namespaceProperties(store: ObjectStore, ns: string[], cache: NamespaceProperties): Promise<Record<string, string>> {
  const key = JSON.stringify(ns);
  let found = cache.get(key);
  if (!found) {
    found = readNamespace(store, ns).then((r) => r?.value.properties ?? {});
    cache.set(key, found);
  }
  return found;
}

/** A table's policy (its record and its namespaces', nearest first); null when the table has no record. */
export async function readTablePolicy(store: ObjectStore, id: string[], cache: NamespaceProperties = new Map()): Promise<MaintenancePolicy | null> {
  const ref = tableRefOf(id);
  const ancestors = Array.from({ length: ref.namespace.length + 1 }, (_, i) => ref.namespace.slice(0, ref.namespace.length - i));
  const [record, ...layers] = await Promise.all([
    readRecord(store, tableRecordKey(ref), TableRecord),
    ...ancestors.map((ns) => namespaceProperties(store, ns, cache)),
  ]);
  if (!record) return null;
  return effectivePolicy(record.value.properties, layers);
}
