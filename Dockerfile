# The service image: Node 24 LTS on Debian (glibc, which the Lance engine's native module needs).
FROM node:24-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm install --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY ui ./ui
COPY scripts/build-ui.ts ./scripts/
RUN npm run build && npm prune --omit=dev
# Serving on every interface without an auth configuration needs LANCE_NS_INSECURE (see README); mount a
# --config file with `auth` to run it authenticated.
ENV LANCE_NS_HOST=0.0.0.0 LANCE_NS_ROOT=/data LANCE_NS_INSECURE=true
EXPOSE 2333
# --no-memory-reducer: see docs/operations.md (Node flags).
CMD ["node", "--no-memory-reducer", "dist/main.js"]
