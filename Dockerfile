# Builds the brook binary and runs one node. docker-compose.yml runs three of these as a
# cluster, each with its config/cluster/node-N.properties (overriding the entrypoint).
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin brook

FROM debian:bookworm-slim
COPY --from=build /src/target/release/brook /usr/local/bin/brook
COPY config/server.properties /etc/brook/server.properties
COPY config/cluster /etc/brook/cluster
VOLUME /var/lib/brook
EXPOSE 9092-9094 9192-9194 9644-9646
ENTRYPOINT ["brook", "serve", "--config", "/etc/brook/server.properties", "--override", "log.dirs=/var/lib/brook"]
