# The service image: Node 20 on Debian (glibc, which the Lance engine's native module needs).
FROM node:20-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm install --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build && npm prune --omit=dev
# No authentication yet: serving on every interface of the container needs LANCE_NS_INSECURE (see README).
ENV LANCE_NS_HOST=0.0.0.0 LANCE_NS_ROOT=/data LANCE_NS_INSECURE=true
EXPOSE 2333
CMD ["node", "dist/main.js"]
