FROM node:20-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
# The CLI and the worker run the compiled JavaScript (dist/).
RUN npm run build
# Starts the worker against the servers named in docker-compose.yml; compose restarts it
# until Temporal answers.
CMD ["node", "bin/memgate.cjs", "start"]
