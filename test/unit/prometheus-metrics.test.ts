import { describe, expect, it } from 'vitest';
import { PrometheusMetrics } from '../../src/metrics/prometheus-metrics.js';
import { metricSamples } from '../support/app.js';

// Requests and store calls reach prom-client in batches (a scrape, or a full buffer): whatever
// the moment of the scrape, it shows every one noted before it, once.

describe('PrometheusMetrics', () => {
  it('shows every request and store call noted before a scrape, across full buffers, once', async () => {
    const metrics = new PrometheusMetrics();
    const scrape = async () => metricSamples((await metrics.scrape()).body);
    for (const calls of [1, 255, 256, 257, 1000]) {
      const before = await scrape();
      for (let i = 0; i < calls; i++) {
        metrics.storeCall('get', i % 2 === 0 ? 'ok' : 'not_found', 0.001);
        metrics.httpRequest('DescribeTable', i % 3 === 0 ? 404 : 200, 0.002);
      }
      const after = await scrape();
      const grew = (key: string) => (after.get(key) ?? 0) - (before.get(key) ?? 0);
      expect(grew('lance_ns_store_requests_total{operation="get",outcome="ok"}'), `${calls} calls`).toBe(Math.ceil(calls / 2));
      expect(grew('lance_ns_store_requests_total{operation="get",outcome="not_found"}')).toBe(Math.floor(calls / 2));
      expect(grew('lance_ns_store_request_duration_seconds_count{operation="get"}')).toBe(calls);
      expect(grew('lance_ns_http_requests_total{operation="DescribeTable",status="404"}')).toBe(Math.ceil(calls / 3));
      expect(grew('lance_ns_http_request_duration_seconds_count{operation="DescribeTable",status_class="2xx"}')).toBe(calls - Math.ceil(calls / 3));
    }
  });
});
