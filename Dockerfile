# Builds the brook binary and runs one node. Used by docker-compose.yml.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p brook

FROM debian:bookworm-slim
COPY --from=build /src/target/release/brook /usr/local/bin/brook
COPY config/server.properties /etc/brook/server.properties
VOLUME /var/lib/brook
EXPOSE 9092 9644
ENTRYPOINT ["brook", "serve", "--config", "/etc/brook/server.properties", "--override", "log.dirs=/var/lib/brook"]
