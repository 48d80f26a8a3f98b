import type { TableMaintenance } from '../../model/maintenance.js';
import type { ObjectStore } from '../../store/object-store.js';
import { readNamespace } from '../catalog/catalog.js';
import { tableRecordKey, tableRefOf } from '../catalog/layout.js';
import { readRecord, TableRecord } from '../catalog/records.js';
import { effectivePolicy, type MaintenancePolicy, policyEntries } from './policy.js';
import { RunSlots, runsOf } from './policy-markers.js';

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

/** The namespaces a table is in, nearest first (its own, ..., the root). */
function ancestorsOf(id: string[]): string[][] {
  const { namespace } = tableRefOf(id);
  return Array.from({ length: namespace.length + 1 }, (_, i) => namespace.slice(0, namespace.length - i));
}

/** A table's policy (its record and its namespaces', nearest first); null when the table has no record. */
export async function readTablePolicy(store: ObjectStore, id: string[], cache: NamespaceProperties = new Map()): Promise<MaintenancePolicy | null> {
  const [record, ...layers] = await Promise.all([
    readRecord(store, tableRecordKey(tableRefOf(id)), TableRecord),
    ...ancestorsOf(id).map((ns) => namespaceProperties(store, ns, cache)),
  ]);
  if (!record) return null;
  return effectivePolicy(record.value.properties, layers);
}

/** DescribeTable's `maintenance` (with_maintenance): the policy key by key, from the table's properties and its namespaces', and the last runs from its slot. */
export async function describeTableMaintenance(
  store: ObjectStore,
  id: string[],
  own: Record<string, string>,
  incarnation: string | null,
): Promise<TableMaintenance> {
  const ancestors = ancestorsOf(id);
  const cache: NamespaceProperties = new Map();
  const [slot, ...layers] = await Promise.all([new RunSlots(store).read(id), ...ancestors.map((ns) => namespaceProperties(store, ns, cache))]);
  return {
    policy: policyEntries(
      own,
      ancestors.map((ns, i) => ({ id: ns, properties: layers[i] ?? {} })),
    ),
    last_runs: runsOf(slot?.value, incarnation),
  };
}
