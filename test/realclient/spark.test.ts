import { describe, expect, it } from 'vitest';
import { listAll } from '../../src/store/object-store.js';
import { readRows } from '../support/arrow-data.js';
import { clientRoots, describeRun, runPythonScript, SPARK_INSTALL_SCRIPT, SPARK_VENV, useClientServer } from '../support/python.js';

// Spark SQL through lance-spark 0.4.0 (org.lance:lance-spark-3.5_2.12 from Maven Central, Spark
// 3.5 in local mode bound to 127.0.0.1) against the service's REST namespace.
// lance-spark turns DROP TABLE into DeregisterTable: the old code then answered the next CREATE
// TABLE of the name 409 code 5 and DROP NAMESPACE 409 code 3, naming a table no listing showed.
// Now the name is free at once, the dropped table's data stays where it was, and the namespace
// drops around it, as with Lance's own directory catalog. On a local root and on radosgw (with
// vended credentials only, as the Python clients). scripts/install-spark-test-deps.sh sets up
// <repo>/.venv-spark (PySpark) and lance-spark's jars once; test_spark runs it in CI too.

const RUN_TIMEOUT_MS = 5 * 60_000;

interface Answer {
  sql: string;
  rows?: unknown[][];
  error?: string;
}

describe.each(clientRoots().map((backend) => ({ name: backend.name, backend })))('lance-spark on $name', ({ backend }) => {
  const client = useClientServer(backend, SPARK_INSTALL_SCRIPT);

  /** Runs Spark SQL statements in one Spark session; each statement's rows or error. */
  async function spark(statements: string[]): Promise<Answer[]> {
    const env = { HOME: client.home, LANCE_NS_URL: client.server.url, LANCE_SPARK_JARS: `${SPARK_VENV}lance-spark-jars`, SPARK_LOCAL_IP: '127.0.0.1' };
    const result = await runPythonScript('test/realclient/spark_client.py', [JSON.stringify(statements)], env, RUN_TIMEOUT_MS, {
      withoutAws: true,
      venvBin: `${SPARK_VENV}bin/`,
    });
    expect(result.code, describeRun('spark_client.py', result)).toBe(0);
    const last = result.stdout.trim().split('\n').pop() ?? '[]';
    return JSON.parse(last) as Answer[];
  }

  it(
    "CREATE TABLE, INSERT, DROP TABLE, CREATE TABLE of the same name, DROP NAMESPACE: all succeed, and the dropped tables' data stays",
    async () => {
      const { server, root } = client;
      const t = 'lance.sparkns.t';
      const c = 'lance.sparkcascade.t';
      // In one Spark session lance-spark 0.4.0 keeps the credentials vended for a table by its name:
      // after DROP TABLE and CREATE TABLE of the name it reads the new table's directory with the
      // old table's credentials (403). On radosgw the re-created table is read in a new session.
      const sameSession = !root.root.startsWith('s3://');
      const first = await spark([
        'CREATE NAMESPACE lance.sparkns',
        `CREATE TABLE ${t} (id BIGINT, name STRING)`,
        `INSERT INTO ${t} VALUES (1, 'a'), (2, 'b')`,
        `SELECT id, name FROM ${t} ORDER BY id`,
        `DROP TABLE ${t}`,
        'SHOW TABLES IN lance.sparkns',
        `CREATE TABLE ${t} (id BIGINT, name STRING)`,
        `INSERT INTO ${t} VALUES (3, 'c')`,
        ...(sameSession ? [`SELECT id, name FROM ${t} ORDER BY id`] : []),
      ]);
      const second = await spark([
        `SELECT id, name FROM ${t} ORDER BY id`,
        `DROP TABLE ${t}`,
        'DROP NAMESPACE lance.sparkns',
        'CREATE NAMESPACE lance.sparkcascade',
        `CREATE TABLE ${c} (id BIGINT)`,
        `INSERT INTO ${c} VALUES (1)`,
        `DROP TABLE ${c}`,
        `CREATE TABLE ${c} (id BIGINT)`,
        `INSERT INTO ${c} VALUES (2)`,
        'DROP NAMESPACE lance.sparkcascade CASCADE',
        'SHOW NAMESPACES IN lance',
      ]);
      // Every statement succeeded; a failure shows the service's answer in the Java exception.
      const answers = [...first, ...second];
      expect(answers.filter((a) => a.error !== undefined)).toEqual([]);
      const rowsOf = (sql: string) => answers.filter((a) => a.sql === sql).map((a) => a.rows);
      expect(rowsOf(`SELECT id, name FROM ${t} ORDER BY id`)).toEqual([
        [
          [1, 'a'],
          [2, 'b'],
        ],
        ...(sameSession ? [[[3, 'c']]] : []),
        [[3, 'c']],
      ]);
      expect(rowsOf('SHOW TABLES IN lance.sparkns')).toEqual([[]]);
      expect(rowsOf('SHOW NAMESPACES IN lance')).toEqual([[]]);
      for (const ns of ['sparkns', 'sparkcascade']) expect((await server.call('POST', `/v1/namespace/${ns}/exists`, {})).status).toBe(404);

      // DROP TABLE deregistered: each dropped table's rows are where they were (the first in the
      // name's directory, the second in a directory of its own beside it) and come back when
      // registered; the Cascade drop dropped the one table left, and kept the deregistered one.
      const engineOptions = root.store.engineStorageOptions();
      expect((await readRows(root.store.location('sparkns/t.lance'), engineOptions)).map((r) => r.id)).toEqual([1, 2]);
      expect((await readRows(root.store.location('sparkcascade/t.lance'), engineOptions)).map((r) => r.id)).toEqual([1]);
      const { store } = root;
      const ownDirs = async (ns: string) =>
        (await listAll(store, `${ns}/`, { delimiter: '/' })).commonPrefixes.filter((p) => p.startsWith(`${ns}/.lance-table-`));
      expect(await ownDirs('sparkcascade')).toEqual([]);
      const own = await ownDirs('sparkns');
      expect(own).toHaveLength(1);
      expect((await server.call('POST', '/v1/namespace/sparkns/create', {})).status).toBe(200);
      for (const [name, location, rows] of [
        ['first', 't.lance', 2],
        ['second', (own[0] ?? '').slice('sparkns/'.length), 1],
      ] as const) {
        const registered = await server.call('POST', `/v1/table/sparkns%24${name}/register`, { location });
        expect(registered.status, registered.text).toBe(200);
        expect((await server.call('POST', `/v1/table/sparkns%24${name}/count_rows`, {})).json).toEqual({ value: rows });
      }
    },
    2 * RUN_TIMEOUT_MS + 30_000,
  );
});
