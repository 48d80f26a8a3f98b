import net from 'node:net';

/**
 * A TCP proxy on 127.0.0.1 in front of a server (an S3 endpoint), to take the server away from a
 * service without stopping it for anyone else: `cut()` does what the server's death does to its
 * clients (open connections reset, new ones refused), `restore()` brings it back on the same port.
 */
export class TcpProxy {
  private readonly sockets = new Set<net.Socket>();
  private server: net.Server | null = null;

  private constructor(
    private readonly target: { host: string; port: number },
    private port: number,
  ) {}

  /** Starts a proxy to the server of `endpoint` (`http://host:port`). */
  static async start(endpoint: string): Promise<TcpProxy> {
    const url = new URL(endpoint);
    const proxy = new TcpProxy({ host: url.hostname, port: Number(url.port) }, 0);
    await proxy.restore();
    return proxy;
  }

  /** The proxy as an endpoint, in place of the server's. */
  get endpoint(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Connections reset, the port closed: the server is gone. */
  async cut(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = null;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const socket of this.sockets) socket.resetAndDestroy();
    this.sockets.clear();
    await closed;
  }

  /** Listens again (on the same port once it has one) and relays every connection to the server. */
  async restore(): Promise<void> {
    if (this.server) return;
    const server = net.createServer((client) => this.relay(client));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as net.AddressInfo).port;
    this.server = server;
  }

  close(): Promise<void> {
    return this.cut();
  }

  private relay(client: net.Socket): void {
    const upstream = net.connect(this.target.port, this.target.host);
    for (const [socket, other] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      this.sockets.add(socket);
      socket.on('error', () => other.destroy());
      socket.on('close', () => {
        this.sockets.delete(socket);
        other.destroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  }
}
