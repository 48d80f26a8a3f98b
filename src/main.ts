// The service's entry point. It sets the size of libuv's thread pool before any other module is
// even loaded: loading an ES module graph may read files through the pool, which starts it with
// the size in the environment at that moment (libuv reads UV_THREADPOOL_SIZE once), so the
// service itself is imported only afterwards.
import './event-loop/thread-pool.js';

await import('./serve.js');
