import { describe, expect, it } from 'vitest';
import { clientRoots, describeRun, runPytest, useClientServer } from '../support/python.js';

// The Python clients people use, each a pytest file run against the service on a loopback port:
// pylance through lance_namespace.connect("rest"), LanceDB Python through connect_namespace("rest")
// (client-side and with query pushdown), and Daft through daft-lance. Each runs on a local root
// and on radosgw. On radosgw the service vends credentials (STS, as configured for
// vended-credentials.test.ts) and the clients get no AWS settings and an empty HOME: whatever they
// read or write there, they do with credentials the service handed them for that table.
// scripts/install-python-test-deps.sh sets up <repo>/.venv with the pinned packages (once).

const PYTEST_FILES = ['pylance_client.py', 'lancedb_client.py', 'daft_client.py'];
const PYTEST_TIMEOUT_MS = 5 * 60_000;

describe.each(clientRoots().map((backend) => ({ name: backend.name, backend })))('Python clients on $name', ({ backend }) => {
  const client = useClientServer(backend);

  it.each(PYTEST_FILES)(
    '%s',
    async (file) => {
      const { server, root, home } = client;
      const result = await runPytest(`test/realclient/${file}`, { HOME: home, LANCE_NS_URL: server.url, LANCE_NS_ROOT: root.root }, PYTEST_TIMEOUT_MS, {
        withoutAws: true,
      });
      expect(result.code, describeRun('pytest', result)).toBe(0);
    },
    PYTEST_TIMEOUT_MS + 30_000,
  );
});
