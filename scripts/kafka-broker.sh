#!/usr/bin/env bash
# Starts and stops a real single-node Apache Kafka broker (KRaft, broker and
# controller in one process) on 127.0.0.1, for the integration suite
# (service/realkafka_test.go and cmd/consumer's black-box tests).
#
#   scripts/kafka-broker.sh start VERSION PORT DIR   # prints the address; DIR holds logs, data, pid
#   scripts/kafka-broker.sh stop DIR
#
# The broker's jars come from Maven Central into a cache
# (DRIFTSTREAM_KAFKA_CACHE, default ~/.cache/driftstream/kafka): nothing is
# committed. Needs Java 17 and Maven. Listeners: PLAINTEXT on PORT,
# SASL_PLAINTEXT (SCRAM-SHA-512, user "driftstream", password "driftstream-pw")
# on PORT+1, the controller on PORT+2, and SSL with mutual TLS on PORT+3: a CA,
# the broker's certificate (127.0.0.1, localhost) and a client certificate
# are made with openssl in DIR/tls (ca.pem, client.pem, client-key.pem).
# message.max.bytes stays at its default. DRIFTSTREAM_KAFKA_ADVERTISED_PORT,
# when set, is the PLAINTEXT port the broker tells its clients (a proxy in
# front of it: the chaos run's).
set -euo pipefail

cmd=${1:?usage: kafka-broker.sh start VERSION PORT DIR | stop DIR}
cache_root=${DRIFTSTREAM_KAFKA_CACHE:-$HOME/.cache/driftstream/kafka}
pom_version=2 # bump when the dependencies below change: the cache is refetched

fetch() { # version -> the directory of its jars
  local version=$1 dir="$cache_root/$1"
  if [ -f "$dir/.complete" ] && [ "$(cat "$dir/.complete")" = "$pom_version" ]; then echo "$dir"; return; fi
  mkdir -p "$dir"
  local logging
  case $version in
    3.*) logging='<dependency><groupId>org.slf4j</groupId><artifactId>slf4j-reload4j</artifactId><version>1.7.36</version></dependency>' ;;
    *) logging='<dependency><groupId>org.slf4j</groupId><artifactId>slf4j-api</artifactId><version>2.0.16</version></dependency>
                <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j2-impl</artifactId><version>2.24.3</version></dependency>
                <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>2.24.3</version></dependency>' ;;
  esac
  cat > "$dir/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>driftstream</groupId><artifactId>kafka-broker</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$version</version></dependency>
    $logging
  </dependencies>
</project>
POM
  rm -rf "$dir/lib"
  (cd "$dir" && mvn -q -B dependency:copy-dependencies -DoutputDirectory=lib -DincludeScope=runtime >&2)
  echo "$pom_version" > "$dir/.complete"
  echo "$dir"
}

case $cmd in
start)
  version=${2:?version}; port=${3:?port}; dir=${4:?dir}
  jars=$(fetch "$version")
  mkdir -p "$dir/data"
  sasl_port=$((port + 1)); ctrl_port=$((port + 2)); tls_port=$((port + 3))
  tls=$dir/tls
  mkdir -p "$tls"
  # A CA, the broker's certificate and a client's, each valid for a day; the
  # broker reads PEM files (KIP-651): its key unencrypted PKCS#8 beside its chain.
  openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=driftstream test CA" \
    -keyout "$tls/ca-key.pem" -out "$tls/ca.pem" 2>/dev/null
  for who in server client; do
    openssl req -newkey rsa:2048 -nodes -subj "/CN=$who" -keyout "$tls/$who-key.pem" -out "$tls/$who.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > "$tls/$who.ext"
    openssl x509 -req -in "$tls/$who.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca-key.pem" -CAcreateserial -days 1 \
      -extfile "$tls/$who.ext" -out "$tls/$who.pem" 2>/dev/null
  done
  cat "$tls/server-key.pem" "$tls/server.pem" > "$tls/server-keystore.pem"
  cat > "$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$ctrl_port
listeners=PLAINTEXT://127.0.0.1:$port,SASL_PLAINTEXT://127.0.0.1:$sasl_port,CONTROLLER://127.0.0.1:$ctrl_port,SSL://127.0.0.1:$tls_port
advertised.listeners=PLAINTEXT://127.0.0.1:${DRIFTSTREAM_KAFKA_ADVERTISED_PORT:-$port},SASL_PLAINTEXT://127.0.0.1:$sasl_port,SSL://127.0.0.1:$tls_port
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL
ssl.keystore.type=PEM
ssl.keystore.location=$tls/server-keystore.pem
ssl.truststore.type=PEM
ssl.truststore.location=$tls/ca.pem
ssl.client.auth=required
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
log.dirs=$dir/data
num.partitions=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=500
log.cleaner.backoff.ms=500
log.retention.check.interval.ms=1000
PROPS
  cat > "$dir/log4j2.yaml" <<'LOG'
Configuration:
  Appenders:
    File: {name: file, fileName: "${sys:kafka.logs.dir}/server.log", PatternLayout: {pattern: "[%d] %p %m (%c)%n"}}
  Loggers:
    Root: {level: INFO, AppenderRef: [{ref: file}]}
LOG
  cat > "$dir/log4j.properties" <<LOG
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=$dir/server.log
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
LOG
  cp="$jars/lib/*"
  logopts=(-Dkafka.logs.dir="$dir" -Dlog4j2.configurationFile="$dir/log4j2.yaml" -Dlog4j.configuration="file:$dir/log4j.properties")
  cluster_id=$(java -cp "$cp" "${logopts[@]}" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -1)
  java -cp "$cp" "${logopts[@]}" kafka.tools.StorageTool format -t "$cluster_id" -c "$dir/server.properties" \
    --add-scram 'SCRAM-SHA-512=[name=driftstream,password=driftstream-pw]' > "$dir/format.log" 2>&1
  nohup java -Xms256m -Xmx512m -XX:+UseG1GC -cp "$cp" "${logopts[@]}" kafka.Kafka "$dir/server.properties" > "$dir/stdout.log" 2>&1 &
  echo $! > "$dir/pid"
  for _ in $(seq 1 240); do
    if grep -q "Kafka Server started" "$dir/server.log" "$dir/stdout.log" 2>/dev/null; then
      echo "127.0.0.1:$port"
      exit 0
    fi
    if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
      echo "kafka $version exited while starting; $dir/stdout.log:" >&2
      tail -30 "$dir/stdout.log" >&2
      exit 1
    fi
    sleep 0.5
  done
  echo "kafka $version did not start within 120 s; see $dir" >&2
  kill "$(cat "$dir/pid")" 2>/dev/null || true
  exit 1
  ;;
stop)
  dir=${2:?dir}
  if [ -f "$dir/pid" ]; then
    pid=$(cat "$dir/pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$dir/pid"
  fi
  ;;
*)
  echo "usage: kafka-broker.sh start VERSION PORT DIR | stop DIR" >&2
  exit 2
  ;;
esac
